"""What a run is, for tables and legends: its model label and its scale label.

Model labels follow the papers: Transformer, Mamba2, GDN, AMOR-GDN / AMOR-Mamba2 (the backbone),
Oryx-TG / Oryx-TM (the linear mixer: G = Gated DeltaNet, M = Mamba2), Serial-<pattern>,
Fused-<mixer>. Keys that only matter to another kind (e.g. model.amor.backbone of a Transformer
run) are ignored.

Scale: a run's preset names its size (`amor-gdn-180m` -> "180M"). Without a preset the parameter
count is not stored in run.h5 yet, so the label is derived from the shape, "d<d_model>xL<n_layers>"
(e.g. "d64xL2"), and scales sort by d_model^2 * n_layers, a proxy for the parameter count.
"""
import re

_MIXER = {"gdn": "GDN", "mamba2": "Mamba2"}
_ORYX = {"gdn": "TG", "mamba2": "TM"}


def model_label(cfg):
    """cfg: flat dotted config dict."""
    kind = cfg.get("model.kind", "transformer")
    if kind == "amor":
        return "AMOR-" + _MIXER.get(cfg.get("model.amor.backbone", "gdn"), "?")
    if kind == "oryx":
        return "Oryx-" + _ORYX.get(cfg.get("model.oryx.linear", "gdn"), "?")
    if kind == "serial":
        return "Serial-" + str(cfg.get("model.pattern", ""))
    if kind == "fused":
        return "Fused-" + _MIXER.get(cfg.get("model.fused_linear", "mamba2"), "?")
    return {"transformer": "Transformer", "mamba2": "Mamba2", "gdn": "GDN"}.get(kind, kind)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)([mMbBkK])$")
_UNIT = {"k": 1e3, "m": 1e6, "b": 1e9}


def scale_label(cfg):
    preset = str(cfg.get("model.preset", "") or "")
    m = _SIZE.search(preset)
    if m:
        return m.group(1) + m.group(2).upper()
    return f"d{cfg.get('model.d_model', '?')}xL{cfg.get('model.n_layers', '?')}"


def scale_order(cfg):
    """A number that sorts scales from small to large (see the module docstring)."""
    preset = str(cfg.get("model.preset", "") or "")
    m = _SIZE.search(preset)
    if m:
        return float(m.group(1)) * _UNIT[m.group(2).lower()]
    d, n = cfg.get("model.d_model", 0) or 0, cfg.get("model.n_layers", 0) or 0
    return float(12 * d * d * max(n, 1))


def is_gated(cfg):
    return cfg.get("model.kind") == "amor"


# Keys that say which model a run is: they make up the (scale, model) row, not extra row levels.
MODEL_KEYS = {"model.kind", "model.preset", "model.amor.backbone", "model.oryx.linear",
              "model.pattern", "model.fused_linear", "model.d_model", "model.n_layers", "model.d_ff"}
