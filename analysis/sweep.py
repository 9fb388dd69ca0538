"""A sweep folder, results/<sweep>/: index.csv plus one <run>-<hash8>/run.h5 per run.

load_sweep(dir) -> Sweep with
  .index     index.csv as written by amor-run (runner/output/sweep_index.h), one row per run;
  .runs      {run name: Run} for the runs whose run.h5 exists;
  .frame()   one row per run: index columns + model, scale, kind and the run.h5 path;
  .metrics() one row per run, one column per '<task>/<metric>' from run.h5's /eval.
Without an index.csv (a sweep still starting, or copied folders) the runs are found by their
run.h5 files alone.
"""
import glob
import os

import pandas as pd

from .run import Run
from .identity import MODEL_KEYS


class Sweep:
    def __init__(self, directory):
        self.dir = os.path.abspath(os.fspath(directory))
        if not os.path.isdir(self.dir):
            raise FileNotFoundError(f"sweep folder {self.dir} does not exist")
        self.name = os.path.basename(self.dir.rstrip("/"))
        index_path = os.path.join(self.dir, "index.csv")
        self.index = pd.read_csv(index_path, dtype={"hash": str}) if os.path.exists(index_path) else None
        self.runs = {}
        self.paths = {}
        if self.index is not None:
            for run, h in zip(self.index["run"], self.index["hash"]):
                path = os.path.join(self.dir, f"{run}-{str(h)[:8]}", "run.h5")
                if os.path.exists(path):
                    self.paths[run] = path
        else:
            for path in sorted(glob.glob(os.path.join(self.dir, "*", "run.h5"))):
                folder = os.path.basename(os.path.dirname(path))
                self.paths[folder.rsplit("-", 1)[0]] = path
        if not self.paths and self.index is None:
            # Most likely a folder above the sweeps (results/ instead of results/<sweep>).
            below = sorted(d for d in os.listdir(self.dir)
                           if glob.glob(os.path.join(self.dir, d, "*", "run.h5")))
            hint = ("; it holds the sweep folder(s) " + ", ".join(below) + ": pass one of those"
                    if below else "")
            raise FileNotFoundError(f"{self.dir} is not a sweep folder: no index.csv and no "
                                    f"<run>/run.h5 in it{hint}")
        self.runs = {name: Run(path, name) for name, path in self.paths.items()}

    def __repr__(self):
        return f"Sweep({self.name!r}, {len(self.runs)} runs)"

    def swept_keys(self):
        """The index's config-key columns (those that are keys of the runs' configs)."""
        if not self.runs:
            return []
        configs = [r.config for r in self.runs.values()]
        known = set().union(*(c.keys() for c in configs))
        if self.index is not None:
            return [c for c in self.index.columns if c in known]
        # No index: the config keys whose values differ between runs.
        return sorted(k for k in known if len({repr(c.get(k)) for c in configs}) > 1)

    def varying_keys(self):
        """Swept keys beyond the model's identity and the seed, with more than one value: the
        extra row levels of the tables (e.g. data.source in the quickstart)."""
        frame = self.frame()
        keys = [k for k in self.swept_keys() if k not in MODEL_KEYS and k != "train.seed"]
        return [k for k in keys if k in frame and frame[k].nunique(dropna=False) > 1]

    def frame(self):
        """One row per run with a run.h5: index columns, then model, scale, kind, path."""
        rows = []
        for name, run in self.runs.items():
            cfg = run.config
            row = {"run": name, "model": run.model, "scale": run.scale, "kind": cfg.get("model.kind"),
                   "scale_order": run.scale_order, "seed": cfg.get("train.seed"), "path": run.path}
            rows.append(row)
        frame = pd.DataFrame(rows, columns=["run", "model", "scale", "kind", "scale_order", "seed", "path"])
        if self.index is not None:
            frame = frame.merge(self.index, on="run", how="left")
        # Without an index.csv the swept keys come from each run's config.
        for key in self.swept_keys():
            if key not in frame:
                frame[key] = [self.runs[r].config.get(key) for r in frame["run"]]
        return frame

    def metrics(self):
        """One row per run, one column per '<task>/<metric>' found in its run.h5."""
        rows = [dict(run=name, **run.all_metrics()) for name, run in self.runs.items()]
        return pd.DataFrame(rows).set_index("run") if rows else pd.DataFrame()

    def runs_with_task(self, task):
        return {n: r for n, r in self.runs.items() if task in r.tasks()}


def load_sweep(directory):
    return Sweep(directory)
