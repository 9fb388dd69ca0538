#!/usr/bin/python3
"""amor-run as a batch system runs it (issue #16), driving the real binary under mpirun.

Usage: /usr/bin/python3 tests/runner/runner_jobs_e2e.py BUILD_BIN_DIR [SCENARIO...]
Each scenario prints 'ok NAME' or 'FAIL NAME: why'; the last line is 'N passed, N failed'.
Scenarios: two jobs with --shard 0/2 and 1/2 run at once on one sweep folder: every run DONE once
and index.csv holding every run (and keeping them when a job runs again and skips); bad --shard
values exit 2 naming the option and create nothing; --shard slurm reads the job array's
variables; plain progress lines under Slurm (SLURM_JOB_ID) or off a terminal, the live bar on one;
a resumed run says "resuming RUN from step N (checkpoint PATH)", run.h5 records the BLAS threads
and a resume with another count warns; one run failed and another stopped by a signal exits 75
(then 1 once the stopped run is done); --dry-run's columns, GPU-hour estimates and total.
"""
import csv
import glob
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

import h5py

from e2e_harness import AMOR, ENV, MPI, Scenarios, amor_run, run_dirs, wait_for, write_sweep

scenario = Scenarios(sys.argv[2:])

TMP = tempfile.mkdtemp(prefix="amor_jobs_e2e_")
SEEDS5 = "sweep:\n  grid:\n    train.seed: [1, 2, 3, 4, 5]\n"


def index_rows(out):
    with open(os.path.join(out, "e2e", "index.csv")) as f:
        return list(csv.DictReader(f))


def checkpoints(run):
    return sorted(c for c in glob.glob(os.path.join(run, "checkpoints", "step-*"))
                  if os.path.basename(c).count(".") == 0)


@scenario
def two_shards_at_once_do_every_run_once_and_index_holds_all():
    d = os.path.join(TMP, "shards")
    sweep = write_sweep(d, steps=3, extra=SEEDS5)
    out = os.path.join(TMP, "shards_out")
    jobs = [subprocess.Popen(MPI + ["-np", "1", AMOR, sweep, "--output", out, "--shard", f"{i}/2"],
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for i in (0, 1)]
    texts = [j.communicate(timeout=600)[0] for j in jobs]
    for j, t in zip(jobs, texts):
        assert j.returncode == 0, t[-2000:]
    assert "shard 0/2: 3 of the 5 runs" in texts[0], texts[0][-1500:]
    assert "shard 1/2: 2 of the 5 runs" in texts[1], texts[1][-1500:]
    dirs = run_dirs(out)
    assert len(dirs) == 5 and all(os.path.exists(os.path.join(x, "DONE")) for x in dirs), dirs
    for x in dirs:  # trained once: one run of 3 steps each
        with h5py.File(os.path.join(x, "run.h5"), "r") as f:
            assert list(f["train/step"][:]) == [1, 2, 3], x
    rows = index_rows(out)
    assert [r["train.seed"] for r in rows] == ["1", "2", "3", "4", "5"], rows  # sweep order
    assert all(r["status"] == "done" and r["final_loss"] for r in rows), rows
    assert sorted(r["run"] + "-" + r["hash"] for r in rows) == [os.path.basename(x) for x in dirs]
    # Shard 1 again: its runs are skipped (DONE); the index keeps every row and their metrics.
    r = amor_run([sweep, "--output", out, "--shard", "1/2"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("already DONE, skipped") == 2, r.stdout
    assert index_rows(out) == rows, index_rows(out)


@scenario
def bad_shard_values_exit_2_naming_the_option():
    sweep = write_sweep(os.path.join(TMP, "badshard"), steps=2)
    out = os.path.join(TMP, "badshard_out")
    env = {k: v for k, v in ENV.items() if not k.startswith("SLURM_")}
    for value, says in [("2/2", "the shard index i must be in [0, 2)"), ("0/0", "at least 1"),
                        ("-1/3", "must be in [0, 3)"), ("abc", "expected i/n"), ("1/x", "expected i/n"),
                        ("slurm", "SLURM_ARRAY_TASK_ID is not set")]:
        r = amor_run([sweep, "--output", out, "--shard", value], env=env)
        assert r.returncode == 2, (value, r.returncode, r.stderr)
        assert "--shard" in r.stderr and says in r.stderr, (value, r.stderr)
        assert "MPI_ABORT" not in r.stderr, r.stderr
    assert not os.path.exists(out)


@scenario
def shard_slurm_takes_the_array_task():
    sweep = write_sweep(os.path.join(TMP, "slurmshard"), steps=2, extra=SEEDS5)
    env = dict(ENV, SLURM_ARRAY_TASK_ID="11", SLURM_ARRAY_TASK_MIN="10", SLURM_ARRAY_TASK_MAX="11",
               SLURM_ARRAY_TASK_COUNT="2", SLURM_ARRAY_TASK_STEP="1")
    r = amor_run([sweep, "--shard", "slurm", "--dry-run"], env=env)
    assert r.returncode == 0, r.stderr
    assert "shard 1/2: 2 of the 5 runs" in r.stdout and r.stdout.strip().endswith("2 runs"), r.stdout
    # Without --shard a job array's task runs the whole sweep: splitting is asked for explicitly.
    r = amor_run([sweep, "--dry-run"], env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("5 runs"), r.stdout


def on_a_terminal(args, env):
    """amor-run under mpirun with its stdout and stderr on a pseudo-terminal: (exit status, output)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(MPI[0], MPI + ["-np", "1", AMOR] + args, env)
    out = b""
    deadline = time.time() + 300
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 1.0)
        if not r:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


@scenario
def plain_progress_under_slurm_or_off_a_terminal_live_bar_on_one():
    sweep = write_sweep(os.path.join(TMP, "progress"), steps=6)
    env = {k: v for k, v in ENV.items() if k != "AMOR_PROGRESS" and not k.startswith("SLURM_")}
    rc, text = on_a_terminal([sweep, "--output", os.path.join(TMP, "progress_tty")], env)
    assert rc == 0, text[-2000:]
    assert "\r\x1b[K" in text and "[######" in text, repr(text[-2000:])  # the live bar
    rc, text = on_a_terminal([sweep, "--output", os.path.join(TMP, "progress_slurm")],
                             dict(env, SLURM_JOB_ID="4242"))
    assert rc == 0, text[-2000:]
    assert "\r" not in text.replace("\r\n", "\n"), repr(text[-2000:])
    assert len(re.findall(r"step [1-6]/6  loss", text)) == 6, text[-2000:]
    # mpirun's output to a pipe (a log): plain lines, though the ranks' stdout is Open MPI's pty
    r = amor_run([sweep, "--output", os.path.join(TMP, "progress_pipe")], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "\r" not in r.stdout and "\x1b[K" not in r.stdout, repr(r.stdout[-1500:])
    assert len(re.findall(r"step [1-6]/6  loss", r.stdout)) == 6, r.stdout[-2000:]


@scenario
def resume_line_and_threads_recorded_and_a_changed_count_warns():
    sweep = write_sweep(os.path.join(TMP, "resume"), steps=3000)
    out = os.path.join(TMP, "resume_out")
    p = subprocess.Popen(MPI + ["-np", "1", AMOR, sweep, "--output", out, "--threads", "1"], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    wait_for(lambda: run_dirs(out) and checkpoints(run_dirs(out)[0]))
    os.kill(p.pid, signal.SIGUSR1)
    text, _ = p.communicate(timeout=300)
    assert p.returncode == 75, (p.returncode, text[-2000:])
    assert "amor-run: 1 BLAS thread per rank (--threads)" in text, text[-2000:]
    run = run_dirs(out)[0]
    ckpt = checkpoints(run)[-1]
    step = int(os.path.basename(ckpt).split("-")[1])
    with h5py.File(os.path.join(run, "run.h5"), "r") as f:
        assert f.attrs["threads"] == 1, dict(f.attrs)
    r = amor_run([sweep, "--output", out, "--threads", "2", "train.steps=3000"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    want = f"resuming {os.path.basename(run)} from step {step} (checkpoint {ckpt})"
    assert want in r.stdout, (want, r.stdout[:1500])
    assert (f"run {os.path.basename(run)} started with 1 BLAS threads per rank and resumes with 2" in r.stderr
            and "--threads 1" in r.stderr), r.stderr[-2000:]
    with h5py.File(os.path.join(run, "run.h5"), "r") as f:
        assert f.attrs["threads"] == 1  # the count the run started with


@scenario
def a_failed_and_a_stopped_run_exit_75_so_the_job_is_requeued():
    # Two groups: run 0 trains long, run 1 (lr 1e30, no clipping) fails within a few steps; then
    # the stop signal stops run 0. The invocation must exit 75 (requeue), not 1.
    extra = "sweep:\n  zip:\n    train.lr: [3.0e-3, 1.0e30]\n"
    sweep = write_sweep(os.path.join(TMP, "mixed"), steps=3000, extra=extra)
    out = os.path.join(TMP, "mixed_out")
    log = os.path.join(TMP, "mixed.log")
    args = [sweep, "--output", out, "train.clip=0", "train.warmup_steps=0"]
    with open(log, "w") as f:
        p = subprocess.Popen(MPI + ["-np", "2", AMOR] + args, env=ENV, stdout=f,
                             stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: "failed: loss is" in open(log).read(), timeout=300)
    wait_for(lambda: any(checkpoints(x) for x in run_dirs(out)), timeout=300)
    os.kill(p.pid, signal.SIGUSR1)
    p.wait(timeout=300)
    text = open(log).read()
    assert p.returncode == 75, (p.returncode, text[-2000:])
    rows = index_rows(out)
    assert sorted(r["status"] for r in rows) == ["failed", "pending"], rows
    # Again: the stopped run resumes and finishes, the failed one fails again: exit 1.
    r = amor_run(args, np_=2)
    assert r.returncode == 1, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    assert "resuming " in r.stdout, r.stdout[:1500]
    assert sorted(r["status"] for r in index_rows(out)) == ["done", "failed"], index_rows(out)


@scenario
def dry_run_lists_parameters_memory_gpu_hours_and_the_total():
    sweep = write_sweep(os.path.join(TMP, "dry"), steps=1000,
                        extra="sweep:\n  grid:\n    model.kind: [transformer, mamba2]\n")
    r = subprocess.run([AMOR, sweep, "--dry-run"], env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["run", "params", "mem/rank", "GPU-h"], lines[0]
    hours = []
    for line in lines[1:3]:
        cells = line.split()
        assert re.fullmatch(r"(transformer|mamba2)-[0-9a-f]{8}", cells[0]), line
        assert re.fullmatch(r"[0-9.]+M", cells[1]) and re.fullmatch(r"[0-9.]+GiB", cells[2]), line
        hours.append(float(cells[3]))
    # 1000 steps x 4 sequences x 32 tokens on one H200 at the smallest measured size's rate (the
    # transformer's 3.41M point, runner/app/gpu_hours.cpp: this model is smaller)
    assert abs(hours[0] - 1000 * 4 * 32 / 697478 / 3600) < 1e-2 * hours[0], hours  # 3 significant digits
    m = re.fullmatch(r"total: (\S+) GPU-hours \(estimate: .*tests/cuda/RESULTS.md.*\)", lines[3])
    assert m and abs(float(m.group(1)) - sum(hours)) < 1e-2 * sum(hours), (lines[3], hours)
    assert lines[4] == "2 runs", lines[4]


scenario.finish(TMP)
