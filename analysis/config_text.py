"""Read a run's resolved config (the `config` attribute of run.h5, or config.yaml).

amor-run writes the resolved config as block YAML in one narrow form (runner/config/canonical.cpp):
nested mappings indented by two spaces, one `key: value` per line, strings double-quoted with
JSON escapes, lists in flow form of quoted strings, numbers and booleans as JSON spells them. So
every leaf value is valid JSON, and this reader needs no YAML library (PyYAML is not one of the
product's dependencies).
"""
import json


def parse_config(text):
    """The config as nested dicts. Raises ValueError naming the line for anything outside the form."""
    root = {}
    stack = [(-1, root)]  # (indent, mapping) of the open mappings
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if not sep:
            raise ValueError(f"config line {lineno}: expected 'key: value', got {line!r}")
        while indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        value = value.strip()
        if value == "":
            child = {}
            parent[key] = child
            stack.append((indent, child))
            continue
        try:
            parent[key] = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"config line {lineno}: key '{key}': cannot read value {value!r} ({e})")
    return root


def flatten(config, prefix=""):
    """{'model': {'amor': {'kappa': 0.2}}} -> {'model.amor.kappa': 0.2} (the dotted keys of index.csv)."""
    out = {}
    for key, value in config.items():
        name = prefix + key
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out
