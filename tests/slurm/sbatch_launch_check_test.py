#!/usr/bin/env python3
"""scripts/slurm/amor-run.sbatch against stand-in srun and scontrol commands (no Slurm needed):
the template counts the tasks that started and fails the job when srun exits 0 without starting
them (a failed step launch: "task 0 launch failed: Unspecified error" with srun's status 0, seen
in the Slurm test on a busy host), where it used to report "amor-run exited 0" and end the job as
COMPLETED with nothing run. Also: a normal launch passes amor-run's status through, exit 75
requeues, and the marks are removed.

usage: sbatch_launch_check_test.py REPO_ROOT
"""
import os
import stat
import subprocess
import sys
import tempfile

FAKE_SRUN = r"""#!/bin/bash
# stand-in srun: mode from FAKE_SRUN_MODE: "launch" runs the command once per task with
# SLURM_PROCID set; "fail" prints srun's launch error and exits 0 without running anything;
# "partial" starts only task 0.
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
case "$FAKE_SRUN_MODE" in
  fail)
    echo "srun: error: task 0 launch failed: Unspecified error" >&2
    exit 0 ;;
  partial) n=1 ;;
  *) n=$SLURM_NTASKS ;;
esac
status=0
for ((i = 0; i < n; ++i)); do
  SLURM_PROCID=$i "$@" || status=$?
done
exit $status
"""

FAKE_SCONTROL = """#!/bin/bash
echo "scontrol $*" >> "$FAKE_LOG"
"""

FAKE_AMOR_RUN = """#!/bin/bash
echo "amor-run rank $SLURM_PROCID $*" >> "$FAKE_LOG"
exit ${FAKE_AMOR_STATUS:-0}
"""


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def main():
    root = sys.argv[1]
    template = os.path.join(root, "scripts", "slurm", "amor-run.sbatch")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = os.path.join(tmp, "bin")
        os.mkdir(bin_dir)
        write_exe(os.path.join(bin_dir, "srun"), FAKE_SRUN)
        write_exe(os.path.join(bin_dir, "scontrol"), FAKE_SCONTROL)
        amor_run = os.path.join(tmp, "amor-run")
        write_exe(amor_run, FAKE_AMOR_RUN)

        def run(name, mode, amor_status=0):
            work = os.path.join(tmp, name)
            os.mkdir(work)
            log = os.path.join(work, "calls.log")
            env = dict(os.environ, PATH=bin_dir + ":" + os.environ["PATH"], FAKE_SRUN_MODE=mode,
                       FAKE_LOG=log, FAKE_AMOR_STATUS=str(amor_status), AMOR_RUN=amor_run,
                       SLURM_JOB_ID="42", SLURM_NTASKS="2", SLURM_JOB_NUM_NODES="1",
                       AMOR_LOG_DIR=os.path.join(work, "logs"))
            for k in ("SLURM_ARRAY_TASK_ID", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE",
                      "SLURM_RESTART_COUNT"):
                env.pop(k, None)
            r = subprocess.run(["bash", template, "sweep.yaml"], cwd=work, env=env,
                               capture_output=True, text=True, timeout=60)
            logs = os.path.join(work, "logs")
            text = "".join(open(os.path.join(logs, f)).read() for f in sorted(os.listdir(logs)))
            calls = open(log).read() if os.path.exists(log) else ""
            left = [f for f in os.listdir(work) if f.startswith(".amor-run-started")]
            return r.returncode, text, calls, left

        def check(cond, what):
            print(("ok   " if cond else "FAIL ") + what)
            if not cond:
                failures.append(what)

        rc, text, calls, left = run("launch", "launch")
        check(rc == 0, f"normal launch: exit 0 (got {rc})")
        check(calls.count("amor-run rank") == 2, "normal launch: both tasks ran amor-run")
        check("amor-run exited 0" in text, "normal launch: the log says amor-run exited 0")
        check(not left, "normal launch: the start marks are removed")

        rc, text, calls, left = run("fail", "fail")
        check(rc == 1, f"srun exits 0 without starting the tasks: the job fails (exit 1, got {rc})")
        check("only 0 of 2 tasks started" in text, "failed launch: the log says how many tasks started")
        check("amor-run rank" not in calls, "failed launch: amor-run never ran")
        check(not left, "failed launch: the start marks are removed")

        rc, text, calls, left = run("partial", "partial")
        check(rc == 1, f"one of two tasks started: the job fails (got {rc})")
        check("only 1 of 2 tasks started" in text, "partial launch: named in the log")

        rc, text, calls, left = run("stopped", "launch", amor_status=75)
        check(rc == 0 and "scontrol requeue 42" in calls,
              f"exit 75 from every task: requeued (exit {rc}, calls {calls.splitlines()})")

        rc, text, calls, left = run("failing", "launch", amor_status=3)
        check(rc == 3, f"amor-run's own failure passes through (exit 3, got {rc})")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
