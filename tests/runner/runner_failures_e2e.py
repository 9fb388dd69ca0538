#!/usr/bin/python3
"""amor-run under the failures of issue #17 section 3, driving the real binary under mpirun.

Usage: /usr/bin/python3 tests/runner/runner_failures_e2e.py BUILD_BIN_DIR [SCENARIO...]
Each scenario prints 'ok NAME' or 'FAIL NAME: why'; the last line is 'N passed, N failed'.
Scenarios: a hung peer (SIGSTOP) ends the job through MPI_Abort with the watchdog's message; a
dead peer (kill -9) ends the job, other groups' runs included, and a rerun resumes them (README
"A rank that hangs or dies"); a checkpointed run whose run.h5 was deleted, emptied or garbled is
refused naming the file, which is left as it is; a damaged newest checkpoint is set aside with a
warning and the run resumes bitwise from the older one; eval-only runs of garbled weights (NaN
validation loss) fail instead of being marked DONE; unreadable eval.weights exit 2 and create
nothing.
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from e2e_harness import (AMOR, ENV, MPI, Scenarios, amor_run, run_dir, run_dirs, wait_for,
                         write_sweep)
from e2e_harness import run_losses as losses

scenario = Scenarios(sys.argv[2:])

TMP = tempfile.mkdtemp(prefix="amor_failures_e2e_")


def checkpoints(run):
    return sorted(c for c in glob.glob(os.path.join(run, "checkpoints", "step-*"))
                  if os.path.basename(c).count(".") == 0)


def rank_pids(p):
    """The amor-run rank processes of the job mpirun p started (in p's session)."""
    out = subprocess.run(["pgrep", "-s", str(p.pid), "-f", "bin/amor-run"], capture_output=True,
                         text=True).stdout.split()
    return [int(x) for x in out if int(x) != p.pid]


def end_session(p):
    """Whatever of the job is left (a stopped rank included) is killed, by session."""
    for pid in rank_pids(p):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    subprocess.run(["pkill", "-KILL", "-s", str(p.pid)])
    p.wait()


# A finished 12-step run (checkpoints at 9 and 12 kept), and its losses: the reference the
# damaged-file scenarios start from (each works on a copy).
REF = os.path.join(TMP, "ref")


def reference_run():
    if not os.path.exists(REF):
        r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", REF])
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return run_dir(REF)


def copy_of_reference(name):
    """A copy of the reference output, its run not DONE (so the next invocation resumes it)."""
    reference_run()
    out = os.path.join(TMP, name)
    shutil.copytree(REF, out)
    os.remove(os.path.join(run_dir(out), "DONE"))
    return out, run_dir(out)


@scenario
def hung_peer_aborts_the_job_with_the_watchdogs_message():
    out = os.path.join(TMP, "hang")
    sweep = write_sweep(os.path.join(TMP, "hang_sweep"), steps=100000, rpr=2)
    env = dict(ENV, AMOR_COMM_TIMEOUT_S="3")
    p = subprocess.Popen(MPI + ["-np", "2", AMOR, sweep, "--output", out], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        wait_for(lambda: run_dirs(out) and checkpoints(run_dirs(out)[0]))
        pids = rank_pids(p)
        assert len(pids) == 2, pids
        os.kill(max(pids), signal.SIGSTOP)  # one rank of the run's group stops mid-training
        t0 = time.time()
        stdout, stderr = p.communicate(timeout=120)  # before the fix: never returned
        took = time.time() - t0
    finally:
        end_session(p)
    assert p.returncode != 0, f"exit {p.returncode}"
    assert "no completion after" in stderr and "AMOR_COMM_TIMEOUT_S=3" in stderr, stderr[-2000:]
    assert "aborting the job (MPI_Abort)" in stderr, stderr[-2000:]
    assert took < 60, f"the job took {took:.0f} s to end after the peer stopped"
    assert not os.path.exists(os.path.join(run_dirs(out)[0], "DONE"))


STEPS_DEAD = 2000  # long enough that neither run ends before the kill


@scenario
def dead_peer_ends_the_job_and_a_rerun_resumes_every_run():
    # README: with ranks_per_run 1 the other rank's unrelated run dies too; a rerun resumes both.
    out = os.path.join(TMP, "dead")
    sweep = write_sweep(os.path.join(TMP, "dead_sweep"), steps=STEPS_DEAD,
                        extra="sweep:\n  grid:\n    train.seed: [1, 2]\n")
    p = subprocess.Popen(MPI + ["-np", "2", AMOR, sweep, "--output", out], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        wait_for(lambda: len(run_dirs(out)) == 2 and all(checkpoints(d) for d in run_dirs(out)))
        pids = rank_pids(p)
        assert len(pids) == 2, pids
        os.kill(max(pids), signal.SIGKILL)
        p.communicate(timeout=120)
    finally:
        end_session(p)
    assert p.returncode != 0, f"exit {p.returncode}"
    assert not glob.glob(os.path.join(out, "e2e", "*", "DONE")), "a run finished: killed too late"
    r = amor_run([sweep, "--output", out], np_=2)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for d in run_dirs(out):
        steps, _ = losses(d)
        assert list(steps) == list(range(1, STEPS_DEAD + 1)), (d, list(steps))
        assert os.path.exists(os.path.join(d, "DONE")), d


@scenario
def deleted_run_h5_of_a_checkpointed_run_is_refused():
    out, run = copy_of_reference("no_h5")
    h5 = os.path.join(run, "run.h5")
    os.remove(h5)
    r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", out])
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert h5 in r.stderr and "is missing" in r.stderr and "start the run over" in r.stderr, r.stderr
    assert not os.path.exists(h5), "a new run.h5 was written"
    assert not os.path.exists(os.path.join(run, "DONE"))


@scenario
def unreadable_run_h5_is_refused_and_left_untouched():
    for name, content in [("empty", b""), ("garbage", b"not an HDF5 file\n" * 100)]:
        out, run = copy_of_reference(f"bad_h5_{name}")
        h5 = os.path.join(run, "run.h5")
        with open(h5, "wb") as f:
            f.write(content)
        r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", out])
        assert r.returncode == 1, (name, r.returncode, r.stderr[-2000:])
        assert h5 in r.stderr and "leaves it untouched" in r.stderr, (name, r.stderr)
        with open(h5, "rb") as f:
            assert f.read() == content, f"{name}: run.h5 was rewritten"
        assert not os.path.exists(os.path.join(run, "DONE"))


@scenario
def damaged_newest_checkpoint_falls_back_to_the_older_one():
    out, run = copy_of_reference("bad_ckpt")
    newest = checkpoints(run)[-1]
    assert newest.endswith("step-00000012"), checkpoints(run)
    shard = glob.glob(os.path.join(newest, "rank-*.safetensors"))[0]
    with open(shard, "r+b") as f:  # cut short, as a full disk or a killed copy leaves it
        f.truncate(os.path.getsize(shard) // 2)
    r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", out])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"warning: checkpoint {newest} cannot be loaded" in r.stderr, r.stderr
    assert os.path.isdir(newest + ".corrupt"), os.listdir(os.path.join(run, "checkpoints"))
    assert "step-00000009" in r.stderr, r.stderr
    s0, l0 = losses(run_dir(REF))
    s1, l1 = losses(run)
    assert list(s1) == list(s0), list(s1)
    assert np.array_equal(l0, l1), f"losses differ after the fallback: {l0} vs {l1}"
    assert os.path.exists(os.path.join(run, "DONE"))


@scenario
def eval_of_garbled_weights_fails_instead_of_done():
    weights = os.path.join(TMP, "garbled.safetensors")
    shutil.copy(os.path.join(reference_run(), "model.safetensors"), weights)
    with open(weights, "r+b") as f:  # keep the header, set every data byte to 0xff (f32 NaN)
        n = int.from_bytes(f.read(8), "little")
        size = os.path.getsize(weights) - 8 - n
        f.seek(8 + n)
        f.write(b"\xff" * size)
    out = os.path.join(TMP, "garbled")
    r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", out, "train.steps=0",
                  f"eval.weights={weights}"])
    assert r.returncode == 1, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert "validation loss is NaN" in r.stderr and weights in r.stderr, r.stderr[-2000:]
    assert not os.path.exists(os.path.join(run_dir(out), "DONE"))
    index = open(os.path.join(out, "e2e", "index.csv")).read()
    assert ",failed," in index, index


@scenario
def unreadable_eval_weights_exit_2_and_create_nothing():
    for name, content in [("missing", None), ("truncated", b"\x10\x00\x00\x00")]:
        weights = os.path.join(TMP, f"{name}.safetensors")
        if content is not None:
            with open(weights, "wb") as f:
                f.write(content)
        out = os.path.join(TMP, f"weights_{name}")
        r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", out,
                      "train.steps=0", f"eval.weights={weights}"], np_=2)
        assert r.returncode == 2, (name, r.returncode, r.stderr[-2000:])
        assert "eval.weights" in r.stderr and weights in r.stderr, (name, r.stderr)
        assert not os.path.exists(out), f"{name}: {out} was created"


@scenario
def unreadable_eval_files_refused_by_dry_run_too():
    # eval.weights and eval.router are read before anything is created, --dry-run included.
    router = os.path.join(TMP, "missing_router.safetensors")
    for key, path, extra in [("eval.weights", os.path.join(TMP, "missing.safetensors"), []),
                             ("eval.router", router, ["model.kind=amor"])]:
        out = os.path.join(TMP, "dry_" + key.replace(".", "_"))
        r = amor_run([write_sweep(os.path.join(TMP, "ref_sweep")), "--output", out, "--dry-run",
                      f"{key}={path}"] + extra, np_=1)
        assert r.returncode == 2, (key, r.returncode, r.stderr[-2000:])
        assert key in r.stderr and path in r.stderr, (key, r.stderr)
        assert not os.path.exists(out), f"{key}: {out} was created"


@scenario
def kind_specific_eval_override_checked_on_the_runs_only_keeps():
    # eval.router on a sweep of several kinds: refused for its transformer runs, but with --only
    # keeping the AMOR runs it is checked on those (here it then fails on the missing file).
    sweep = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments",
                         "quickstart.yaml")
    router = os.path.join(TMP, "no_router.safetensors")
    r = amor_run([sweep, "--output", os.path.join(TMP, "router_all"), "--dry-run", f"eval.router={router}"], np_=1)
    assert r.returncode == 2 and "model.kind transformer has none" in r.stderr, r.stderr[-2000:]
    r = amor_run([sweep, "--output", os.path.join(TMP, "router_amor"), "--dry-run", "--only", "*amor*",
                  f"eval.router={router}"], np_=1)
    assert r.returncode == 2 and router in r.stderr and "has none" not in r.stderr, r.stderr[-2000:]


scenario.finish(TMP)
