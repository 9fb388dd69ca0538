"""One run's run.h5 (layout: runner/output/run_file.h), read lazily.

A Run keeps only its path; every accessor opens the file, reads what it was asked for and closes
it, so a notebook can hold hundreds of runs and read a file that is still being written (SWMR).
Per-token arrays are read per sequence or per array, never all at once unless asked.
"""
import contextlib
import os

import h5py
import numpy as np
import pandas as pd

from .config_text import flatten, parse_config
from .identity import model_label, scale_label, scale_order


@contextlib.contextmanager
def open_h5(path):
    """Open for reading; SWMR where the file allows it (amor-run's files), plainly otherwise."""
    try:
        f = h5py.File(path, "r", swmr=True)
    except (OSError, ValueError):
        f = h5py.File(path, "r")
    try:
        yield f
    finally:
        f.close()


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


class Run:
    def __init__(self, path, name=None):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"run file {self.path} does not exist")
        self._attrs = None
        self._config = None
        self.name = name or self.attrs.get("run_name") or os.path.basename(os.path.dirname(self.path))

    def __repr__(self):
        return f"Run({self.name!r}, {self.model}, {self.scale})"

    # --- identity -------------------------------------------------------------------------------
    @property
    def attrs(self):
        """Root attributes (config, sweep, run_name, created, finished, amor_blocks ...)."""
        if self._attrs is None:
            with open_h5(self.path) as f:
                self._attrs = {k: _text(v) for k, v in f.attrs.items()}
                for k, v in self._attrs.items():
                    if isinstance(v, np.generic):
                        self._attrs[k] = v.item()
        return self._attrs

    @property
    def config(self):
        """The resolved config, flat: {'model.kind': 'amor', 'model.amor.kappa': 0.2, ...}."""
        if self._config is None:
            self._config = flatten(parse_config(self.attrs.get("config", "")))
        return self._config

    @property
    def model(self):
        return model_label(self.config)

    @property
    def scale(self):
        return scale_label(self.config)

    @property
    def scale_order(self):
        return scale_order(self.config)

    @property
    def amor_blocks(self):
        return int(self.attrs.get("amor_blocks", 0))

    # --- training log ---------------------------------------------------------------------------
    def train(self):
        """/train as a DataFrame, one row per logged step; per-block columns fire_rate_<k>, tau_<k>."""
        with open_h5(self.path) as f:
            if "train" not in f:
                return pd.DataFrame()
            g = f["train"]
            cols = {k: g[k][()] for k in g if g[k].ndim == 1}
            for name, short in (("block_fire_rate", "fire_rate"), ("block_tau", "tau")):
                if name in g and g[name].ndim == 2:
                    a = g[name][()]
                    for k in range(a.shape[1]):
                        cols[f"{short}_{k}"] = a[:, k]
        return pd.DataFrame(cols)

    # --- evaluations ----------------------------------------------------------------------------
    def tasks(self):
        """Evaluated task names (those whose step attribute is >= 0 or absent)."""
        with open_h5(self.path) as f:
            if "eval" not in f:
                return []
            return [t for t in f["eval"] if int(f["eval"][t].attrs.get("step", 0)) >= 0]

    def metrics(self, task):
        """{metric: value} of a task's latest evaluation ({} when the task is absent)."""
        with open_h5(self.path) as f:
            key = "eval/" + task
            if key not in f:
                return {}
            return {k: float(v) for k, v in f[key].attrs.items()}

    def all_metrics(self):
        """{'<task>/<metric>': value} over every task (the `step` attributes left out)."""
        out = {}
        with open_h5(self.path) as f:
            for task in f.get("eval", {}):
                g = f["eval"][task]
                if int(g.attrs.get("step", 0)) < 0:
                    continue
                for k, v in g.attrs.items():
                    if k != "step":
                        out[f"{task}/{k}"] = float(v)
        return out

    def examples(self, task):
        """A task's per-example datasets as a DataFrame (one row per example); empty when absent."""
        with open_h5(self.path) as f:
            key = "eval/" + task
            if key not in f:
                return pd.DataFrame()
            g = f[key]
            cols = {k: g[k][()] for k in g if isinstance(g[k], h5py.Dataset)}
        return pd.DataFrame(cols)

    def history(self, task):
        """Every evaluation of a task, one row each (columns step and the metrics)."""
        with open_h5(self.path) as f:
            key = f"eval/{task}/history"
            if key not in f:
                return pd.DataFrame()
            return pd.DataFrame({k: f[key][k][()] for k in f[key]})

    # --- per-token records ----------------------------------------------------------------------
    def token_sets(self):
        """Names of the recorded token sets that hold at least one token."""
        with open_h5(self.path) as f:
            if "tokens" not in f:
                return []
            return [s for s in f["tokens"] if f["tokens"][s]["offsets"].shape[0] > 1]

    def tokens(self, name):
        return TokenSet(self.path, name)


class TokenSet:
    """/tokens/<name>: flat per-token arrays and offsets. Reads lazily; gate is [K, total].

    role (uint8 [total], where recorded) is each token's role in its synthetic task;
    role_names[code] names it ('none' for tasks without roles; data/synthetic/token_roles.h)."""

    def __init__(self, path, name):
        self.path, self.name = path, name
        with open_h5(path) as f:
            key = "tokens/" + name
            if key not in f:
                raise KeyError(f"{path}: no token set '{name}'")
            self.offsets = f[key]["offsets"][()]
            self.fields = list(f[key])
            self.blocks = f[key]["gate"].shape[0] if "gate" in f[key] else 0
            self.role_names = ([_text(n) for n in f[key]["role"].attrs["names"]]
                               if "role" in f[key] and "names" in f[key]["role"].attrs else [])

    def roles(self):
        """Each token's role name (a numpy array of str, [total]); None where roles were not
        recorded (files made before they were)."""
        if not self.role_names:
            return None
        codes = self.array("role")
        names = np.asarray(self.role_names + ["?"], dtype=object)
        return names[np.minimum(codes, len(self.role_names))]

    def __len__(self):
        return max(len(self.offsets) - 1, 0)

    @property
    def total(self):
        return int(self.offsets[-1]) if len(self.offsets) else 0

    def array(self, field):
        """One whole flat array (gate: [K, total])."""
        with open_h5(self.path) as f:
            return f[f"tokens/{self.name}/{field}"][()]

    def sequence(self, i):
        """{field: array} of sequence i (gate sliced to [K, length])."""
        if not 0 <= i < len(self):
            raise IndexError(f"token set '{self.name}' has {len(self)} sequences, asked for {i}")
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        with open_h5(self.path) as f:
            g = f["tokens/" + self.name]
            return {k: (g[k][:, a:b] if k == "gate" else g[k][a:b]) for k in g if k != "offsets"}

    def frame(self):
        """Every token as a row: sequence, position, token_id, entropy, loss, mode, role (the code;
        role_names decodes it), gate_<k>."""
        lengths = np.diff(self.offsets)
        cols = {"sequence": np.repeat(np.arange(len(lengths)), lengths),
                "position": np.concatenate([np.arange(n) for n in lengths]) if len(lengths) else
                np.zeros(0, dtype=np.int64)}
        with open_h5(self.path) as f:
            g = f["tokens/" + self.name]
            for k in ("token_ids", "entropy", "loss", "mode", "role"):
                if k in g:
                    cols[k] = g[k][()]
            if "gate" in g:
                gate = g["gate"][()]
                for k in range(gate.shape[0]):
                    cols[f"gate_{k}"] = gate[k]
        return pd.DataFrame(cols)
