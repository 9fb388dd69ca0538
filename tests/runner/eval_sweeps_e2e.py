"""The evaluation-speed sweeps of issue #18 end to end on the CPU with tiny overrides (a few
seconds each): experiments/eval-niah-32k.yaml and experiments/eval-longbench-16k.yaml with data
from scripts/make_longbench_like.py. What runs on the H200 at 1.5B and 16-32K tokens runs here at
toy size through the same files: the sweep files parse, each run evaluates its task, prints the
generation progress line (prompt length, prefill, decode ms/step) and writes one score per
example to run.h5; the data script refuses bad options with exit 2.

Usage: eval_sweeps_e2e.py BUILD_BIN_DIR"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import h5py

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AMOR = os.path.join(os.path.abspath(sys.argv[1]), "amor-run")
MAKE = os.path.join(ROOT, "scripts", "make_longbench_like.py")
ESSAY = os.path.join(ROOT, "tests", "fixtures", "eval", "essay.txt")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", AMOR_PROGRESS="plain")
TINY = ["device=cpu", "model.n_layers=1", "model.d_ff=64", "eval.dtype=master"]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args, cwd):
    return subprocess.run([AMOR] + args, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def scores(out, task):
    files = glob.glob(os.path.join(out, "*", "*", "run.h5"))
    if len(files) != 1:
        return None, None
    with h5py.File(files[0], "r") as f:
        return list(f["eval/%s/score" % task][()]), list(f["eval/%s/length" % task][()])


def progress_line(stdout, task):
    """Groups: requests done, requests dealt, the last batch's size, its longest prompt, its
    decode steps."""
    return re.search(r"%s: (\d+)/(\d+) requests generated; last batch: (\d+) x (?:\d+-)?(\d+)-token "
                     r"prompt, prefill [0-9.]+ s, (\d+) decode steps [0-9.]+ s \([0-9.]+ ms/step\)" % task,
                     stdout)


with tempfile.TemporaryDirectory() as tmp:
    # NIAH at 600 tokens (three depths) on the mamba2 variant.
    out = os.path.join(tmp, "niah")
    r = run([os.path.join(ROOT, "experiments", "eval-niah-32k.yaml"), "--only", "mamba2*", "--output", out]
            + TINY + ["model.d_model=32", "eval.niah.lengths=[600]", "eval.max_length=700"], tmp)
    check(r.returncode == 0, "eval-niah-32k.yaml (tiny, cpu) exits 0: " + r.stderr[-300:])
    m = progress_line(r.stdout, "niah_single_1")
    check(m is not None and m.group(1) == m.group(2) == "3", "niah progress line names 3/3 requests: "
          + r.stdout[-400:])
    s, lengths = scores(out, "niah_single_1")
    check(s is not None and len(s) == 3 and all(0 < n <= 600 for n in lengths),
          "niah run.h5 holds 3 scores with prompt lengths <= 600: %s" % lengths)

    # LongBench-style: the data script, then the transformer variant on 3 examples.
    data = os.path.join(tmp, "longbench-like")
    r = subprocess.run(["/usr/bin/python3", MAKE, data, ESSAY, "--examples", "3", "--context-bytes", "500"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "make_longbench_like.py writes the data: " + r.stderr[-300:])
    with open(os.path.join(data, "narrativeqa.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    check(len(rows) == 3 and all(len(x["context"]) == 500 and x["answers"][0] in x["context"] for x in rows),
          "3 examples of 500 context bytes, each holding its answer")
    out = os.path.join(tmp, "lb")
    r = run([os.path.join(ROOT, "experiments", "eval-longbench-16k.yaml"), "--only", "transformer*",
             "--output", out] + TINY + ["model.d_model=64", "eval.max_length=700"], tmp)
    check(r.returncode == 0, "eval-longbench-16k.yaml (tiny, cpu) exits 0: " + r.stderr[-300:])
    m = progress_line(r.stdout, "longbench_narrativeqa")
    check(m is not None and m.group(1) == m.group(2) == "3" and int(m.group(4)) > 500,
          "longbench progress line: 3/3 requests, prompts longer than the context: " + r.stdout[-400:])
    s, _ = scores(out, "longbench_narrativeqa")
    check(s is not None and len(s) == 3, "longbench run.h5 holds 3 scores")
    # The three examples decoded together (their prompts need not be of one length), each prompt
    # prefilled in calls of 128 tokens.
    out3 = os.path.join(tmp, "lb3")
    r = run([os.path.join(ROOT, "experiments", "eval-longbench-16k.yaml"), "--only", "transformer*",
             "--output", out3] + TINY + ["model.d_model=64", "eval.max_length=700", "eval.batch_size=3",
                                         "eval.prefill_chunk=128"], tmp)
    m = progress_line(r.stdout, "longbench_narrativeqa")
    check(r.returncode == 0 and m is not None and m.group(3) == "3",
          "longbench with eval.batch_size=3 eval.prefill_chunk=128 decodes the 3 examples as one batch: " + r.stdout[-400:])
    s3, _ = scores(out3, "longbench_narrativeqa")
    check(s3 is not None and list(s3) == list(s), "batched scores equal one at a time: %s vs %s" % (s3, s))

    for bad, why in ((["--examples", "0"], "no examples"), (["--context-bytes", "x"], "not a number"),
                     (["--bogus", "1"], "an unknown option"), (["--examples"], "a missing value")):
        r = subprocess.run(["/usr/bin/python3", MAKE, data, ESSAY] + bad, capture_output=True, text=True)
        check(r.returncode == 2 and "make_longbench_like.py:" in r.stderr,
              "make_longbench_like.py refuses %s with exit 2" % why)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
