"""What the end-to-end scripts share (runner_e2e.py, runner_failures_e2e.py): the amor-run binary
under mpirun, a tiny sweep, run folders and their losses, waiting, and the scenario runner that
prints 'ok NAME' / 'FAIL NAME: why' and the closing 'N passed, N failed' line."""
import glob
import os
import shutil
import subprocess
import sys
import time

import h5py

BIN = os.path.abspath(sys.argv[1])
AMOR = os.path.join(BIN, "amor-run")
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", AMOR_PROGRESS="plain")

SWEEP = """name: e2e
base:
  model: {kind: KIND, vocab: 260, d_model: 32, n_layers: 1, d_ff: 64, head_dim: 16,
          gdn: {head_dim: 16, chunk: 16}, mamba2: {head_dim: 16, d_state: 8, chunk: 16}}
  data: {source: corpus, seq_len: 32}
  train: {steps: STEPS, micro_batch: 4, lr: 3.0e-3, warmup_steps: 2, log_every: 1, seed: 3}
  checkpoint: {every: 3, keep: 2}
  parallel: {ranks_per_run: RPR}
"""


def write_sweep(d, kind="transformer", steps=12, rpr=1, extra=""):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "sweep.yaml")
    with open(path, "w") as f:
        f.write(SWEEP.replace("KIND", kind).replace("STEPS", str(steps)).replace("RPR", str(rpr)) + extra)
    return path


def amor_run(args, np_=1, env=None, **kw):
    return subprocess.run(MPI + ["-np", str(np_), AMOR] + args, env=env or ENV,
                          capture_output=True, text=True, timeout=600, **kw)


def run_dirs(out):
    return sorted(d for d in glob.glob(os.path.join(out, "e2e", "*")) if os.path.isdir(d))


def run_dir(out):
    dirs = run_dirs(out)
    assert len(dirs) == 1, dirs
    return dirs[0]


def run_losses(run):
    """(steps, losses) of the run folder `run`'s run.h5."""
    with h5py.File(os.path.join(run, "run.h5"), "r") as f:
        return f["train/step"][:], f["train/loss"][:]


def wait_for(cond, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return
        time.sleep(0.05)
    raise TimeoutError("condition not reached")


class Scenarios:
    """`@scenarios` runs the function at once (reporting, not raising, its failure) unless `only`
    names others; `finish(tmp)` removes tmp, prints the totals and exits 0 only if all passed."""

    def __init__(self, only=()):
        self.only = set(only)
        self.results = []

    def __call__(self, fn):
        name = fn.__name__
        if self.only and name not in self.only:
            return fn
        try:
            fn()
            self.results.append(True)
            print(f"ok   {name}", flush=True)
        except Exception as e:  # report and go on to the next scenario
            self.results.append(False)
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
        return fn

    def finish(self, tmp):
        shutil.rmtree(tmp, ignore_errors=True)
        passed = sum(self.results)
        print(f"{passed} passed, {len(self.results) - passed} failed")
        sys.exit(0 if passed == len(self.results) and self.results else 1)
