#!/usr/bin/python3
"""The Slurm templates (scripts/slurm/amor-run.sbatch: srun --mpi=pmix; amor-run-mpirun.sbatch:
mpirun in the batch script) against a real Slurm (issue #16): starts munged, slurmctld and slurmd
on this host (a config written here, state under a temporary folder), submits a small sweep with
each template at once (1-minute time limit, 2 ranks), and checks for each that

1. the time limit's early USR1 (--signal=USR1@50, B:USR1@50 for mpirun) makes the ranks
   checkpoint and exit 75 and the template requeue the job (Restarts=1);
2. `scancel --signal=USR1 JOBID` (--batch for mpirun) on the restarted job does the same
   (Restarts=2);
3. (before Slurm starts) a job with more GPUs than tasks per node is refused with exit 2, and so
   is a job array's task without --shard;
4. each restart resumed from the step it stopped at (its log's first progress line, and the line
   "resuming RUN from step N"), the logs hold plain progress lines (no live bar: SLURM_JOB_ID is
   set), the job ends COMPLETED with the run DONE, run.h5 holds every step once, and the losses
   are bitwise equal to an uninterrupted run under mpirun with the same ranks and threads;
5. meanwhile a job array of 2 tasks (amor-run.sbatch ... --shard slurm, one rank each) splits a
   sweep of 4 short runs: both tasks COMPLETED, every run DONE and trained once, and index.csv
   holds all 4 runs as done;
6. meanwhile preemption (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE): a job of the
   srun template in the partition `low` (GraceTime=30) trains a shorter sweep; once it has made
   progress a job in the partition `high` (higher PriorityTier, same node) that needs its memory
   preempts it: the ranks get SIGTERM, checkpoint and exit 75, the job is requeued, resumes from
   its checkpoint once the high job is done, and ends COMPLETED with the run DONE and its losses
   bitwise equal to an uninterrupted run. (The other jobs run in the partition `test`, which is
   not preemptible; memory, not CPUs, makes the high job need the low one's place.)

Then it stops the daemons it started (AMOR_SLURM_TEST_KEEP=1 keeps the temporary folder). Exits 77 (skipped) when slurm-wlm or munge is not installed
(scripts/setup.sh installs them) or when not root.

    /usr/bin/python3 tests/slurm/slurm_requeue_test.py BUILD/bin [REPO_ROOT]
"""
import csv
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.path.abspath(sys.argv[1])
ROOT = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "../.."))
AMOR = os.path.join(BIN, "amor-run")
TEMPLATE = os.path.join(ROOT, "scripts/slurm/amor-run.sbatch")
STEPS = 3000
PREEMPT_STEPS = 600

ARRAY_SWEEP = """name: array
base:
  model: {kind: transformer, vocab: 260, d_model: 32, n_layers: 1, d_ff: 64, head_dim: 16}
  data: {source: corpus, seq_len: 32}
  train: {steps: 20, micro_batch: 4, lr: 3.0e-3, warmup_steps: 2, log_every: 10, seed: 3}
sweep:
  grid:
    train.seed: [1, 2, 3, 4]
"""

SWEEP = f"""name: slurm
base:
  model: {{kind: transformer, vocab: 260, d_model: 64, n_layers: 2, d_ff: 128, head_dim: 16}}
  data: {{source: corpus, seq_len: 64}}
  train: {{steps: {STEPS}, micro_batch: 8, lr: 3.0e-3, warmup_steps: 2, log_every: 50, seed: 3}}
  checkpoint: {{every: 100, keep: 2}}
  parallel: {{ranks_per_run: 2}}
"""

PREEMPT_SWEEP = SWEEP.replace("name: slurm", "name: preempt").replace(f"steps: {STEPS},", f"steps: {PREEMPT_STEPS},")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


for tool in ["munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "mpirun"]:
    if not shutil.which(tool):
        skip(f"{tool} not found: install the Debian packages slurm-wlm and munge (scripts/setup.sh does)")
if os.geteuid() != 0:
    skip("the Slurm daemons are started as root here; run as root")
if not os.access(AMOR, os.X_OK):
    print(f"FAIL: no amor-run at {AMOR}")
    sys.exit(1)

import h5py  # noqa: E402  (Debian's python3-h5py; only after the skip checks)
import numpy as np  # noqa: E402

TMP = tempfile.mkdtemp(prefix="amor-slurm-")
daemons = []   # (name, Popen) of every process this test started


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_daemons():
    # Jobs first (their slurmstepd and ranks are not children of this test), then the daemons.
    if ENV and any(n == "slurmctld" and p.poll() is None for n, p in daemons):
        subprocess.run(["scancel", "--full", "--user=root"], env=ENV, capture_output=True)
        t0 = time.time()
        while time.time() - t0 < 30 and subprocess.run(
                ["squeue", "-h", "-t", "all"], env=ENV, capture_output=True, text=True).stdout.strip():
            if not subprocess.run(["pgrep", "-x", "slurmstepd"], capture_output=True).stdout:
                break
            time.sleep(0.5)
    for name, p in reversed(daemons):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def log_tail(path, n=30):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError as e:
        return str(e)


def fail(why):
    print(f"FAIL: {why}")
    for f in sorted(glob.glob(os.path.join(TMP, "*", "logs", "*"))) + [os.path.join(TMP, "slurmctld.log"),
                                                                   os.path.join(TMP, "slurmd.log")]:
        print(f"--- {f}\n{log_tail(f)}")
    raise SystemExit(1)


def wait_for(cond, timeout, what):
    """poll() during set-up, where a timeout ends the whole test (fail: the logs, exit 1)."""
    try:
        return poll(cond, timeout, what)
    except Failed as e:
        fail(str(e))


def start(name, argv, **kw):
    p = subprocess.Popen(argv, stdout=open(os.path.join(TMP, name + ".out"), "w"),
                         stderr=subprocess.STDOUT, start_new_session=True, **kw)
    daemons.append((name, p))
    return p


def job(jobid):
    """scontrol show job's fields (JobState, Restarts, ExitCode, ...) as a dict."""
    r = subprocess.run(["scontrol", "show", "job", "-o", str(jobid)], capture_output=True, text=True, env=ENV)
    return dict(re.findall(r"(\w+)=(\S*)", r.stdout))


def progress_steps(log):
    return [int(m) for m in re.findall(r" step +(\d+)/\d+ ", open(log, errors="replace").read())]


def stopped_at(log):
    m = re.search(r"stopped by (\S+) at step (\d+)", open(log, errors="replace").read())
    return (m.group(1), int(m.group(2))) if m else (None, None)


def gpu_check():
    """Without Slurm: a job with 8 GPUs per node but 4 tasks per node is refused (exit 2, a log
    that says what to ask for) before anything is launched."""
    for name, (script, _, _) in TEMPLATES.items():
        logs = os.path.join(TMP, "gpucheck-" + name)
        env = dict(os.environ, SLURM_JOB_ID="7", SLURM_GPUS_PER_NODE="gpu:h200:8", SLURM_NTASKS_PER_NODE="4",
                   AMOR_LOG_DIR=logs, AMOR_RUN="/nonexistent/amor-run")
        r = subprocess.run(["bash", os.path.join(ROOT, script), "sweep.yaml"], env=env, capture_output=True,
                           text=True, timeout=60, cwd=TMP)
        text = open(os.path.join(logs, "amor-run-7-r0.log")).read()
        if r.returncode != 2 or "8 GPUs per node but 4 tasks per node" not in text or "--ntasks-per-node=8" not in text:
            fail(f"{name}: 8 GPUs and 4 tasks per node not refused: exit {r.returncode}, log {text!r}")
        env = dict(os.environ, SLURM_JOB_ID="8", SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_JOB_ID="8",
                   AMOR_LOG_DIR=logs, AMOR_RUN="/nonexistent/amor-run")
        r = subprocess.run(["bash", os.path.join(ROOT, script), "sweep.yaml"], env=env, capture_output=True,
                           text=True, timeout=60, cwd=TMP)
        text = open(os.path.join(logs, "amor-run-8-r0.log")).read()
        if r.returncode != 2 or "without --shard" not in text:
            fail(f"{name}: an array task without --shard not refused: exit {r.returncode}, log {text!r}")
    print("both templates refuse 8 GPUs per node with 4 tasks per node, and array tasks without --shard (exit 2)")


def main():
    t_start = time.time()
    gpu_check()
    # munge: a key of our own and a socket under TMP, so nothing of the host's is touched.
    key = os.path.join(TMP, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o600)
    sock = os.path.join(TMP, "munge.socket")
    start("munged", ["munged", "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                     f"--pid-file={TMP}/munged.pid", f"--log-file={TMP}/munged.log",
                     f"--seed-file={TMP}/munged.seed"])
    wait_for(lambda: os.path.exists(sock), 20, "munged's socket")

    host = socket.gethostname().split(".")[0]
    cpus = max(10, os.cpu_count())  # room for every job's ranks at once (config_overrides): 2+2+2 (test), 2+1 (low, high)
    conf = os.path.join(TMP, "slurm.conf")
    os.makedirs(os.path.join(TMP, "state"))
    os.makedirs(os.path.join(TMP, "spool"))
    os.makedirs(os.path.join(TMP, "tmpfs"))
    with open(conf, "w") as f:
        f.write(f"""ClusterName=amortest
SlurmctldHost={host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long before it may start again (default 120 s)
AuthInfo=socket={sock},cred_expire=30
StateSaveLocation={TMP}/state
SlurmdSpoolDir={TMP}/spool
# the steps' scratch (srun --mpi=pmix makes spmix_appdir_<uid>_<job>.<step> there): this test's
# own folder, since job ids restart at 1 with every test's fresh slurmctld and a folder left in
# /tmp by a killed earlier run made that step's launch fail ("task 0 launch failed")
TmpFS={TMP}/tmpfs
SlurmctldPidFile={TMP}/slurmctld.pid
SlurmdPidFile={TMP}/slurmd.pid
SlurmctldLogFile={TMP}/slurmctld.log
SlurmdLogFile={TMP}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# memory is what the preempting job needs (not enforced: no cgroups); everything else takes little
DefMemPerCPU=100
# preemption: a job in `high` requeues the jobs in `low` it needs the resources of; `low` gives
# them GraceTime seconds after the SIGTERM to checkpoint; `test` is never preempted
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SchedulerType=sched/builtin
# the scheduler's periodic pass (default 60 s) is what starts a requeued job once its wait is over
SchedulerParameters=sched_interval=2
JobRequeue=1
ReturnToService=2
# the node as configured here, even with fewer real CPUs (2-core machines run both jobs at once)
SlurmdParameters=config_overrides
KillWait=10
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName={host} CPUs={cpus} RealMemory=10000 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF
PartitionName=low Nodes={host} MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=30
PartitionName=high Nodes={host} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
""")
    global ENV
    ENV = dict(os.environ, SLURM_CONF=conf)
    start("slurmctld", ["slurmctld", "-D", "-f", conf], env=ENV)
    start("slurmd", ["slurmd", "-D", "-f", conf], env=ENV)

    def node_idle():
        r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=ENV)
        return r.stdout.strip() == "idle"
    wait_for(node_idle, 60, "the node to be idle (sinfo)")
    print(f"slurm up in {time.time() - t_start:.1f} s")

    sweep = os.path.join(TMP, "sweep.yaml")
    with open(sweep, "w") as f:
        f.write(SWEEP)
    threads = dict(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", AMOR_PROGRESS="plain")

    # The uninterrupted reference, under mpirun with the template's ranks and threads, alongside.
    ref_out = os.path.join(TMP, "ref")
    ref = subprocess.Popen(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", AMOR, sweep,
                            "--output", ref_out], env=dict(os.environ, **threads),
                           stdout=open(os.path.join(TMP, "ref.log"), "w"), stderr=subprocess.STDOUT)
    daemons.append(("reference", ref))
    psweep = os.path.join(TMP, "preempt-sweep.yaml")
    with open(psweep, "w") as f:
        f.write(PREEMPT_SWEEP)
    pref_out = os.path.join(TMP, "preempt-ref")
    pref = subprocess.Popen(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", AMOR, psweep,
                             "--output", pref_out], env=dict(os.environ, **threads),
                            stdout=open(os.path.join(TMP, "preempt-ref.log"), "w"), stderr=subprocess.STDOUT)
    daemons.append(("preempt-reference", pref))

    array = submit_array()

    # Both templates at once (their own results and logs), each as the README submits it; a
    # 1-minute limit with the signal 50 s before it, so Slurm signals 10-40 s in (its timer runs
    # every 30 s); the run needs over a minute on 2 busy cores.
    results = {}
    threads_ = [threading.Thread(target=scenario, args=(t, results, t_start)) for t in TEMPLATES]
    threads_.append(threading.Thread(target=scenario, args=("preempt", results, t_start)))
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    if ref.wait(timeout=600) != 0:
        fail(f"the reference run failed: {log_tail(os.path.join(TMP, 'ref.log'))}")
    if pref.wait(timeout=600) != 0:
        fail(f"the preemption's reference run failed: {log_tail(os.path.join(TMP, 'preempt-ref.log'))}")
    for name in [*TEMPLATES, "preempt"]:
        if isinstance(results.get(name), str):
            fail(f"{name}: {results[name]}")
        runs = results[name]
        steps = PREEMPT_STEPS if name == "preempt" else STEPS
        refs = sorted(glob.glob(os.path.join(pref_out, "preempt", "*", "run.h5") if name == "preempt" else
                                os.path.join(ref_out, "slurm", "*", "run.h5")))
        if len(runs) != 1 or len(refs) != 1 or os.path.basename(os.path.dirname(runs[0])) != os.path.basename(os.path.dirname(refs[0])):
            fail(f"{name}: run folders {runs} vs reference {refs}")
        if not os.path.exists(os.path.join(os.path.dirname(runs[0]), "DONE")):
            fail(f"{name}: the run is not DONE")
        with h5py.File(runs[0], "r") as a, h5py.File(refs[0], "r") as b:
            sa, la = a["train/step"][:], a["train/loss"][:]
            sb, lb = b["train/step"][:], b["train/loss"][:]
        if list(sa) != list(range(1, steps + 1)) or list(sb) != list(sa):
            fail(f"{name}: steps in run.h5: {len(sa)} (first {list(sa[:3])}, last {list(sa[-3:])})")
        if not np.array_equal(la, lb):
            fail(f"{name}: losses differ from the uninterrupted run at {int(np.argmax(la != lb))} steps of {len(la)}")
        print(f"{name}: run DONE, {steps} steps once each, losses bitwise equal to the uninterrupted run")
    try:
        check_array(*array)
    except Failed as e:
        fail(f"job array: {e}")
    print(f"ok in {time.time() - t_start:.0f} s")


def submit_array():
    """A job array of 2 tasks, one rank each, splitting ARRAY_SWEEP with --shard slurm."""
    d = os.path.join(TMP, "array")
    os.makedirs(os.path.join(d, "logs"))
    sweep = os.path.join(d, "sweep.yaml")
    with open(sweep, "w") as f:
        f.write(ARRAY_SWEEP)
    env = dict(ENV, AMOR_RUN=AMOR, AMOR_LOG_DIR=os.path.join(d, "logs"))
    for k in ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "AMOR_PROGRESS", "AMOR_MAX_RESTARTS"]:
        env.pop(k, None)
    r = subprocess.run(["sbatch", "--parsable", "--array=0-1", "--nodes=1", "--ntasks-per-node=1", "--time=10",
                        f"--chdir={d}", TEMPLATE, sweep, "--output", os.path.join(d, "results"), "--shard", "slurm"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"sbatch --array: {r.stderr}")
    jobid = r.stdout.strip().split(";")[0]
    print(f"array (job {jobid}): submitted 2 tasks with --shard slurm", flush=True)
    return jobid, d


def check_array(jobid, d):
    ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
    tasks = [f"{jobid}_{i}" for i in (0, 1)]
    poll(lambda: all(job(t).get("JobState") in ended for t in tasks), 300, "the array's tasks to end")
    for t in tasks:
        info = job(t)
        check(info.get("JobState") == "COMPLETED", f"task {t}: {info}")
    logs = sorted(glob.glob(os.path.join(d, "logs", "*.log")))
    text = "".join(open(f, errors="replace").read() for f in logs)
    check(len(logs) == 2 and "shard 0/2: 2 of the 4 runs" in text and "shard 1/2: 2 of the 4 runs" in text,
          f"logs {logs}: {text[-1500:]}")
    runs = sorted(glob.glob(os.path.join(d, "results", "array", "*", "run.h5")))
    check(len(runs) == 4, f"run folders: {runs}")
    for h in runs:
        check(os.path.exists(os.path.join(os.path.dirname(h), "DONE")), f"{h}: not DONE")
        with h5py.File(h, "r") as f:
            check(list(f["train/step"][:]) == list(range(1, 21)), f"{h}: steps {list(f['train/step'][:])}")
    with open(os.path.join(d, "results", "array", "index.csv")) as f:
        rows = list(csv.DictReader(f))
    check([r["train.seed"] for r in rows] == ["1", "2", "3", "4"] and all(r["status"] == "done" for r in rows),
          f"index.csv: {rows}")
    print(f"array (job {jobid}): both tasks COMPLETED, 4 runs DONE once each, index.csv holds all 4")


class Failed(Exception):
    pass


def check(cond, why):
    if not cond:
        raise Failed(why)


def poll(cond, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = cond()
        if v:
            return v
        time.sleep(0.5)
    raise Failed(f"timed out after {timeout} s waiting for {what}")


def scenario(name, results, t_start):
    try:
        results[name] = run_preempt(t_start) if name == "preempt" else run_template(name, t_start)
    except Failed as e:
        results[name] = str(e)


def run_template(name, t_start):
    """Submits the sweep with template `name`; returns its run.h5 files once the job COMPLETED."""
    script, signal_opt, scancel = TEMPLATES[name]
    logs = os.path.join(TMP, name, "logs")
    out = os.path.join(TMP, name, "results")
    os.makedirs(logs)
    env = dict(ENV, AMOR_RUN=AMOR, AMOR_LOG_DIR=logs, AMOR_MPIRUN_ARGS="--allow-run-as-root")
    for k in ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "AMOR_PROGRESS", "AMOR_MAX_RESTARTS"]:
        env.pop(k, None)   # the templates' defaults: threads, progress, restart bound
    r = subprocess.run(["sbatch", "--parsable", "--nodes=1", "--ntasks-per-node=2", "--time=1",
                        f"--signal={signal_opt}", f"--chdir={os.path.join(TMP, name)}",
                        os.path.join(ROOT, script), os.path.join(TMP, "sweep.yaml"), "--output", out],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0, f"sbatch: {r.stderr}")
    jobid = r.stdout.strip().split(";")[0]
    say = lambda msg: print(f"{name} (job {jobid}) at {time.time() - t_start:.0f} s: {msg}", flush=True)
    say(f"submitted with --time=1 --signal={signal_opt}")

    # 1. time limit: USR1 before it, exit 75, requeue.
    ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
    poll(lambda: job(jobid).get("Restarts", "0") != "0" or job(jobid).get("JobState") in ended, 200,
         "the requeue after the time limit's signal")
    info = job(jobid)
    check(info.get("Restarts", "0") != "0", f"not requeued after the time limit's signal: {info}")
    say(f"requeued after the time limit's signal ({job(jobid).get('JobState')})")
    # The restarted job gets an hour, so that the next stop is ours.
    subprocess.run(["scontrol", "update", f"JobId={jobid}", "TimeLimit=60"], check=True, env=ENV)

    # 2. scancel --signal=USR1 once the restarted job has made progress.
    r1 = os.path.join(logs, f"amor-run-{jobid}-r1.log")
    poll(lambda: os.path.exists(r1) and progress_steps(r1), 200, "progress in the restarted job")
    subprocess.run(["scancel", *scancel, "--signal=USR1", jobid], check=True, env=ENV)
    say(" ".join(["scancel", *scancel, "--signal=USR1"]))

    # 3. the second restart finishes.
    poll(lambda: job(jobid).get("JobState") in ended, 400,
         "the job to end")
    info = job(jobid)
    say(f"JobState={info.get('JobState')} Restarts={info.get('Restarts')} ExitCode={info.get('ExitCode')}")
    check(info.get("JobState") == "COMPLETED" and info.get("Restarts") == "2",
          f"expected COMPLETED after 2 restarts: {info}")

    r = [os.path.join(logs, f"amor-run-{jobid}-r{i}.log") for i in range(3)]
    for f in r:
        check(os.path.exists(f), f"no log {f}")
    for i in range(2):
        sig, step = stopped_at(r[i])
        text = open(r[i]).read()
        check(sig == "SIGUSR1" and "amor-run exited 75" in text and "requeueing job" in text,
              f"start {i} did not stop by SIGUSR1, exit 75 and requeue")
        first = progress_steps(r[i + 1])[0]
        check(f"resuming " in open(r[i + 1]).read() and f"from step {step} (checkpoint " in open(r[i + 1]).read(),
              f"start {i + 1} has no 'resuming ... from step {step}' line")
        expect = (step // 50 + 1) * 50
        check(step >= 50 and first == expect,
              f"start {i} stopped at step {step}; start {i + 1}'s first progress line is step {first}, "
              f"expected {expect} (resume from the checkpoint)")
        say(f"start {i}: stopped by {sig} at step {step}, exit 75, requeued; start {i + 1} resumed (first line step {first})")
    check("amor-run exited 0" in open(r[2]).read(), "the last start did not exit 0")
    for f in r:
        check("\r" not in open(f, errors="replace", newline="").read(), f"{f}: a live progress bar in the log")
    return sorted(glob.glob(os.path.join(out, "slurm", "*", "run.h5")))


def run_preempt(t_start):
    """Submits the preemption sweep with amor-run.sbatch to the partition `low`, preempts it with a
    job in `high` that needs its memory; returns its run.h5 files once the job COMPLETED."""
    d = os.path.join(TMP, "preempt")
    logs, out = os.path.join(d, "logs"), os.path.join(d, "results")
    os.makedirs(logs)
    env = dict(ENV, AMOR_RUN=AMOR, AMOR_LOG_DIR=logs)
    for k in ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "AMOR_PROGRESS", "AMOR_MAX_RESTARTS"]:
        env.pop(k, None)
    r = subprocess.run(["sbatch", "--parsable", "--partition=low", "--mem=6000", "--nodes=1", "--ntasks-per-node=2",
                        "--time=30", f"--chdir={d}", TEMPLATE, os.path.join(TMP, "preempt-sweep.yaml"),
                        "--output", out], capture_output=True, text=True, env=env)
    check(r.returncode == 0, f"sbatch: {r.stderr}")
    jobid = r.stdout.strip().split(";")[0]
    say = lambda msg: print(f"preempt (job {jobid}) at {time.time() - t_start:.0f} s: {msg}", flush=True)
    say("submitted to the partition low (--mem=6000)")
    r0 = os.path.join(logs, f"amor-run-{jobid}-r0.log")
    poll(lambda: os.path.exists(r0) and progress_steps(r0), 300, "progress in the low job")
    r = subprocess.run(["sbatch", "--parsable", "--partition=high", "--mem=6000", "--ntasks=1", "--time=5",
                        f"--chdir={d}", "--output=high-%j.out", "--wrap", "sleep 5"],
                       capture_output=True, text=True, env=ENV)
    check(r.returncode == 0, f"sbatch (high): {r.stderr}")
    high = r.stdout.strip().split(";")[0]
    say(f"submitted job {high} to the partition high (--mem=6000) at step {max(progress_steps(r0))}")

    ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED")
    poll(lambda: job(jobid).get("Restarts", "0") != "0" or job(jobid).get("JobState") in ended, 120,
         "the low job's requeue on preemption")
    say(f"requeued ({job(jobid).get('JobState')}); high job {job(high).get('JobState')}")
    poll(lambda: job(jobid).get("JobState") in ended, 400, "the low job to end")
    info, hinfo = job(jobid), job(high)
    say(f"JobState={info.get('JobState')} Restarts={info.get('Restarts')} ExitCode={info.get('ExitCode')}; "
        f"high job {hinfo.get('JobState')}")
    check(hinfo.get("JobState") == "COMPLETED", f"the high job: {hinfo}")
    check(info.get("JobState") == "COMPLETED" and info.get("Restarts") == "1",
          f"expected COMPLETED after 1 restart: {info}")
    r1 = os.path.join(logs, f"amor-run-{jobid}-r1.log")
    check(os.path.exists(r1), f"no log {r1}")
    sig, step = stopped_at(r0)
    text0, text1 = open(r0).read(), open(r1).read()
    check(sig == "SIGTERM" and "amor-run exited 75" in text0, f"start 0 did not stop by SIGTERM and exit 75")
    check(f"from step {step} (checkpoint " in text1 and "resuming " in text1,
          f"start 1 has no 'resuming ... from step {step}' line")
    first = progress_steps(r1)[0]
    check(step >= 50 and first == (step // 50 + 1) * 50,
          f"start 0 stopped at step {step}; start 1's first progress line is step {first}")
    check("amor-run exited 0" in text1, "the last start did not exit 0")
    say(f"start 0: preempted, stopped by {sig} at step {step}, exit 75; start 1 resumed (first line step {first})")
    return sorted(glob.glob(os.path.join(out, "preempt", "*", "run.h5")))


# name: (template, the time limit's --signal, scancel's options for a checkpoint and requeue)
TEMPLATES = {
    "srun": ("scripts/slurm/amor-run.sbatch", "USR1@50", []),
    "mpirun": ("scripts/slurm/amor-run-mpirun.sbatch", "B:USR1@50", ["--batch"]),
}


ENV = None
try:
    main()
finally:
    stop_daemons()
    if os.environ.get("AMOR_SLURM_TEST_KEEP"):
        print(f"kept {TMP}")
    else:
        shutil.rmtree(TMP, ignore_errors=True)
