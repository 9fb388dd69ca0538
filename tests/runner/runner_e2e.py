#!/usr/bin/python3
"""End-to-end tests of amor-run (issue #5), driving the real binary under mpirun.

Usage: /usr/bin/python3 tests/runner/runner_e2e.py BUILD_BIN_DIR
Each scenario prints 'ok NAME' or 'FAIL NAME: why'; the last line is 'N passed, N failed'.
Scenarios: an uninterrupted run; kill -9 mid-run then the same command resumes to bitwise-equal
losses; SIGTERM (as Slurm sends it, to the ranks) and the user signal (through mpirun) checkpoint
and exit 75, and the next invocation resumes; DONE runs are skipped; a changed config is refused;
4 ranks in groups of 2 do every run exactly once; run.h5 has design §6's layout and opens in h5py
while the run is going; a run folder in use by another invocation is refused, and resumes once
that one is gone; device cuda without a GPU fails the run with a message; bad YAML exits 2 and
creates nothing.
"""
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

import h5py
import numpy as np

from e2e_harness import (AMOR, ENV, MPI, Scenarios, amor_run, run_dir, run_losses, wait_for,
                         write_sweep)

# AMOR_E2E_ONLY: comma-separated scenario names, to run just those
scenario = Scenarios([n for n in os.environ.get("AMOR_E2E_ONLY", "").split(",") if n])


def losses(out):
    return run_losses(run_dir(out))


TMP = tempfile.mkdtemp(prefix="amor_e2e_")
REF = os.path.join(TMP, "ref")


@scenario
def uninterrupted_run_and_layout():
    sweep = write_sweep(TMP)
    r = amor_run([sweep, "--output", REF])
    assert r.returncode == 0, r.stdout + r.stderr
    d = run_dir(REF)
    assert os.path.exists(os.path.join(d, "DONE"))
    with h5py.File(os.path.join(d, "run.h5"), "r") as f:
        for k in ["config", "config_hash", "sweep", "run_name", "amor_run_version", "git_commit",
                  "world_size", "created", "finished"]:
            assert k in f.attrs, f"attribute {k} missing"
        for k in ["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "fire_rate", "tau"]:
            assert f["train/" + k].shape == (12,), k
        assert list(f["train/step"][:]) == list(range(1, 13))
        assert f["train/loss"][-1] < f["train/loss"][0], "loss did not fall"
        t = f["tokens/valid"]
        for k in ["token_ids", "entropy", "loss", "mode", "offsets"]:
            assert k in t, k
        assert t["offsets"][-1] == t["token_ids"].shape[0]
        assert "loss" in f["eval/valid"].attrs
        mem = f["eval/memory"].attrs
        assert mem["world_size"] == 1 and mem["param_bytes"] > 0 and mem["optimizer_bytes"] == 2 * mem["param_bytes"], dict(mem)
    index = open(os.path.join(REF, "e2e", "index.csv")).read()
    assert index.startswith("run,hash,status") and ",done," in index, index


def any_checkpoint(out):
    """A complete checkpoint exists (older ones are pruned: keep 2, so wait for any)."""
    return [c for c in glob.glob(os.path.join(out, "e2e", "*", "checkpoints", "step-*"))
            if not c.endswith(".partial")]


@scenario
def kill_9_then_resume_is_bitwise_equal():
    d = os.path.join(TMP, "k")
    os.makedirs(d, exist_ok=True)
    sweep = write_sweep(d, steps=150)
    ref = os.path.join(TMP, "kill_ref")
    r = amor_run([sweep, "--output", ref])
    assert r.returncode == 0, r.stdout + r.stderr
    out = os.path.join(TMP, "kill")
    p = subprocess.Popen(MPI + ["-np", "1", AMOR, sweep, "--output", out], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: any_checkpoint(out))
    # kill -9 the whole job: mpirun puts its ranks in their own process groups, but they stay in
    # the session start_new_session made, so kill every process of that session and wait for it.
    subprocess.run(["pkill", "-KILL", "-s", str(p.pid)])
    p.wait()
    wait_for(lambda: subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True).returncode != 0)
    assert not glob.glob(os.path.join(out, "e2e", "*", "DONE")), "killed too late to test resume"
    r = amor_run([sweep, "--output", out])
    assert r.returncode == 0, r.stdout + r.stderr
    s0, l0 = losses(ref)
    s1, l1 = losses(out)
    assert list(s1) == list(s0), f"steps {list(s1)}"
    assert np.array_equal(l0, l1), f"losses differ: {l0} vs {l1}"


def stop_and_resume(out, send):
    d = os.path.join(TMP, "s")
    os.makedirs(d, exist_ok=True)
    sweep = write_sweep(d, steps=150)
    p = subprocess.Popen(MPI + ["-np", "2", AMOR, sweep, "--output", out, "parallel.ranks_per_run=2"],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    wait_for(lambda: any_checkpoint(out))
    send(p)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 75, f"exit {p.returncode}: {text[-2000:]}"
    assert "stopped by" in text, text[-2000:]
    d = run_dir(out)
    assert not os.path.exists(os.path.join(d, "DONE"))
    r = amor_run([sweep, "--output", out, "parallel.ranks_per_run=2"], np_=2)
    assert r.returncode == 0, r.stdout + r.stderr
    steps, _ = losses(out)
    assert list(steps) == list(range(1, 151)), f"steps after resume {list(steps)}"


@scenario
def sigterm_to_the_ranks_checkpoints_and_exits_75():
    def send(p):
        ranks = subprocess.run(["pgrep", "-f", "-s", str(p.pid), "bin/amor-run"], capture_output=True,
                               text=True).stdout.split()
        ranks = [int(x) for x in ranks if int(x) != p.pid]
        assert ranks, "no rank processes found"
        for pid in ranks:
            os.kill(pid, signal.SIGTERM)
    stop_and_resume(os.path.join(TMP, "term"), send)


@scenario
def user_signal_through_mpirun_checkpoints_and_exits_75():
    stop_and_resume(os.path.join(TMP, "usr1"), lambda p: os.kill(p.pid, signal.SIGUSR1))


@scenario
def done_runs_are_skipped():
    r = amor_run([write_sweep(TMP), "--output", REF])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "already DONE, skipped" in r.stdout, r.stdout


@scenario
def changed_config_is_refused():
    out = os.path.join(TMP, "changed")
    sweep = write_sweep(TMP)
    assert amor_run([sweep, "--output", out]).returncode == 0
    with open(sweep) as f:
        text = f.read().replace("lr: 3.0e-3", "lr: 1.0e-3")
    with open(sweep, "w") as f:
        f.write(text)
    r = amor_run([sweep, "--output", out])
    assert r.returncode == 1, r.returncode
    assert "another config" in r.stderr, r.stderr


@scenario
def four_ranks_in_groups_of_two_do_each_run_once():
    out = os.path.join(TMP, "groups")
    d = os.path.join(TMP, "g")
    os.makedirs(d, exist_ok=True)
    sweep = write_sweep(d, steps=4, rpr=2, extra="sweep:\n  grid:\n    train.seed: [1, 2, 3]\n")
    r = amor_run([sweep, "--output", out], np_=4)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = sorted(glob.glob(os.path.join(out, "e2e", "*", "run.h5")))
    assert len(runs) == 3, runs
    for h in runs:
        with h5py.File(h, "r") as f:
            assert f.attrs["world_size"] == 2
            mem = f["eval/memory"].attrs
            assert mem["param_bytes"] * 2 >= mem["model_param_bytes"] > mem["param_bytes"], dict(mem)
            assert list(f["train/step"][:]) == [1, 2, 3, 4], h
    index = open(os.path.join(out, "e2e", "index.csv")).read()
    assert index.count(",done,") == 3, index


@scenario
def run_h5_is_readable_while_training():
    out = os.path.join(TMP, "swmr")
    sweep = write_sweep(TMP, steps=60)
    p = subprocess.Popen(MPI + ["-np", "1", AMOR, sweep, "--output", out], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        seen = []

        def rows_growing():
            h = glob.glob(os.path.join(out, "e2e", "*", "run.h5"))
            if not h:
                return False
            try:
                with h5py.File(h[0], "r", swmr=True) as f:
                    n = f["train/loss"].shape[0]
            except OSError:
                return False
            if n and (not seen or n > seen[-1]):
                seen.append(n)
            return len(seen) >= 2
        wait_for(rows_growing)
    finally:
        p.wait(timeout=300)
    assert p.returncode == 0


@scenario
def a_run_folder_in_use_is_refused_then_resumes():
    # Two invocations of one sweep at once (e.g. a resubmitted job): the second must not touch the
    # run the first is training; once the first is gone the run resumes from its checkpoint.
    d = os.path.join(TMP, "lock")
    os.makedirs(d, exist_ok=True)
    sweep = write_sweep(d, steps=150)
    out = os.path.join(TMP, "lock_out")
    p = subprocess.Popen(MPI + ["-np", "1", AMOR, sweep, "--output", out], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: any_checkpoint(out))
        # Freeze the first invocation (it keeps its lock while stopped): on a loaded machine it
        # could otherwise finish its 150 steps before the second one starts.
        subprocess.run(["pkill", "-STOP", "-s", str(p.pid)])
        r = amor_run([sweep, "--output", out])
        assert r.returncode == 1, f"exit {r.returncode}: {r.stdout[-1500:]} {r.stderr[-1500:]}"
        assert "is in use by another amor-run" in r.stderr, r.stderr[-2000:]
        assert not glob.glob(os.path.join(out, "e2e", "*", "DONE")) or p.poll() is not None
    finally:
        subprocess.run(["pkill", "-KILL", "-s", str(p.pid)])
        p.wait()
        wait_for(lambda: subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True).returncode != 0)
    # kill -9 left the lock file behind; the lock itself died with its holder.
    r = amor_run([sweep, "--output", out])
    assert r.returncode == 0, r.stdout + r.stderr
    steps, _ = losses(out)
    assert list(steps) == list(range(1, 151)), f"steps after resume {list(steps)}"


@scenario
def device_cuda_without_a_gpu_fails_that_run_with_a_message():
    # CI has no GPU: a cuda run must fail cleanly (exit 1, the reason in one line), not crash.
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        return  # a GPU is here: the cuda tests (tests/cuda) cover this machine
    d = os.path.join(TMP, "nogpu")
    os.makedirs(d, exist_ok=True)
    r = amor_run([write_sweep(d, steps=2), "--output", os.path.join(TMP, "nogpu_out"), "device=cuda"])
    assert r.returncode == 1, f"exit {r.returncode}: {r.stdout[-1500:]} {r.stderr[-1500:]}"
    assert ("no usable CUDA device" in r.stderr or "built without CUDA" in r.stderr), r.stderr[-2000:]
    assert "run with device: cpu" in r.stderr, r.stderr[-2000:]


@scenario
def bad_yaml_exits_2_and_creates_nothing():
    out = os.path.join(TMP, "bad")
    bad = os.path.join(TMP, "bad.yaml")
    with open(bad, "w") as f:
        f.write("name: bad\nbase:\n  train:\n    stpes: 3\n")
    r = amor_run([bad, "--output", out])
    assert r.returncode == 2, r.returncode
    assert "bad.yaml:4" in r.stderr and "stpes" in r.stderr, r.stderr
    assert not os.path.exists(out)


@scenario
def models_that_cannot_be_built_or_fit_exit_2_naming_file_line_key_and_create_nothing():
    # issue #17: heads that do not divide the width, sizes that overflow 64 bits, and runs that
    # cannot fit are refused at expansion, before the run folder, config or lock exist
    cases = [  # (lines under base, line of the bad key, key)
        ("  model:\n    kind: transformer\n    d_model: 100\n    vocab: 260\n", 5, "model.d_model"),
        ("  model:\n    d_model: 2048\n    n_kv_heads: 3\n    vocab: 260\n", 5, "model.n_kv_heads"),
        ("  model:\n    kind: oryx\n    d_model: 100\n    vocab: 260\n", 5, "model.d_model"),
        ("  model:\n    kind: mamba2\n    mamba2: {d_state: 2305843009213693952}\n    vocab: 260\n", 5,
         "model.mamba2.d_state"),
        ("  model:\n    kind: mamba2\n    mamba2: {expand: 4611686018427387904}\n    vocab: 260\n", 5,
         "model.mamba2.expand"),
        ("  train:\n    micro_batch: 4611686018427387904\n  model:\n    vocab: 260\n", 4, "train.micro_batch"),
        ("  model:\n    n_layers: 100000000\n    vocab: 260\n", 4, "model.n_layers"),
    ]
    for i, (base, line, key) in enumerate(cases):
        out = os.path.join(TMP, f"shape{i}")
        bad = os.path.join(TMP, f"shape{i}.yaml")
        with open(bad, "w") as f:
            f.write("name: shape\nbase:\n" + base)
        for dry in ([], ["--dry-run"]) if i < 2 else ([],):
            t0 = time.time()
            r = amor_run([bad, "--output", out] + dry)
            assert r.returncode == 2, (base, dry, r.returncode, r.stdout[-500:], r.stderr[-500:])
            assert f"shape{i}.yaml:{line}: key '{key}'" in r.stderr, (base, r.stderr)
            assert "MPI_ABORT" not in r.stderr, r.stderr
            assert not os.path.exists(out), (base, os.listdir(out))
            assert time.time() - t0 < 60, (base, time.time() - t0)


# Issue #17 §1: each passed validation and then failed (or crashed) later. Each is refused with
# exit 2, file:line:key (or file:line for a second document), and nothing is created.
BAD_CONFIGS = [
    ("kappa", "name: bad\nbase:\n  model: {vocab: 260}\n  model.amor.kappa: -0.1\n",
     ":4: key 'model.amor.kappa'"),
    ("momentum", "name: bad\nbase:\n  model: {vocab: 260}\n  model.amor.momentum: 1.5\n",
     ":4: key 'model.amor.momentum'"),
    ("vocab_default", "name: bad\nbase: {train: {steps: 2}}\n", ": key 'model.vocab'"),
    ("vocab", "name: bad\nbase:\n  train: {steps: 2}\n  model.vocab: 256\n", ":4: key 'model.vocab'"),
    ("long_name", "name: " + "n" * 100000 + "\nbase: {model.vocab: 260}\n", ":1: key 'name'"),
    ("long_scalar", "name: bad\nbase:\n  model.vocab: 260\n  train.lr: " + "1" * 100000 + "\n",
     ":4: key 'train.lr'"),
    ("name_300", "name: " + "n" * 300 + "\nbase: {model.vocab: 260}\n", ":1: key 'name'"),
    ("two_documents", "name: bad\nbase: {model.vocab: 260, train.steps: 2}\n---\nname: other\n",
     ":3: a second YAML document"),
]


@scenario
def bad_configs_of_issue_17_exit_2_and_create_nothing():
    for tag, text, where in BAD_CONFIGS:
        out = os.path.join(TMP, "bad_" + tag)
        bad = os.path.join(TMP, f"bad_{tag}.yaml")
        with open(bad, "w") as f:
            f.write(text)
        for extra in (["--dry-run"], []):
            r = amor_run([bad, "--output", out] + extra)
            assert r.returncode == 2, (tag, extra, r.returncode, r.stderr[-2000:])
            assert bad + where in r.stderr, (tag, extra, r.stderr[-2000:])
            assert not os.path.exists(out), (tag, extra)


@scenario
def papers_sweeps_expand_with_their_parameter_counts():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([AMOR, os.path.join(repo, "experiments", "amor-table.yaml"), "--dry-run"],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("24 runs"), r.stdout[-300:]
    assert "preset_amor-1.5b-gdn-caabb167" in r.stdout and "1524.03M" in r.stdout
    assert "181.97M" in r.stdout  # AMOR-GDN 180M: 181,967,832 parameters
    r = subprocess.run([AMOR, os.path.join(repo, "experiments", "oryx-table.yaml"), "--dry-run"],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("20 runs"), r.stdout[-300:]


@scenario
def quickstart_names_and_summary_columns_mean_something():
    """Issue #16 §4: the quickstart's runs are named by what their model reads (no backbone beside
    a transformer), and its summary shows a text task's score only for the corpus runs."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(TMP, "quickstart")
    r = subprocess.run(MPI + ["-np", "2", AMOR, os.path.join(repo, "experiments", "quickstart.yaml"),
                              "--output", out, "-q", "train.steps=2", "checkpoint.every=0",
                              "eval.mqar.examples=4", "eval.ppl_by_position.num_sequences=1",
                              "eval.niah.depths=[0]"],
                       env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("run "))
    header = lines[head]
    for col in ["loss", "valid", "recall", "fire", "niah_single_1", "passkey", "ppl_by_position"]:
        assert col in header.split(), header
    rows = {l.split()[0].rsplit("-", 1)[0]: l for l in lines[head + 1:head + 11]}
    assert sorted(rows) == sorted(["mqar-transformer", "mqar-mamba2", "mqar-gdn", "mqar-amor-gdn",
                                   "mqar-amor-mamba2", "corpus-transformer", "corpus-mamba2",
                                   "corpus-gdn", "corpus-amor-gdn", "corpus-amor-mamba2"]), rows
    ppl_end = header.index("ppl_by_position") + len("ppl_by_position")
    fire_end = header.index("fire") + len("fire")
    for name, line in rows.items():
        ppl = line[ppl_end - 8:ppl_end].strip()
        fire = line[fire_end - 8:fire_end].strip()
        assert (ppl == "") == name.startswith("mqar-"), (name, line)  # no text score for MQAR models
        assert (fire == "") == ("amor" not in name), (name, line)  # fire rate: AMOR's gates only
    index = open(os.path.join(out, "quickstart", "index.csv")).read().splitlines()
    cols = index[0].split(",")
    ppl_col = next(i for i, c in enumerate(cols) if c.startswith("ppl_by_position"))
    for row in index[1:]:
        cells = row.split(",")
        assert (cells[ppl_col] == "") == cells[0].startswith("mqar-"), row


@scenario
def nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint():
    out = os.path.join(TMP, "nan")
    d = os.path.join(TMP, "n")
    os.makedirs(d, exist_ok=True)
    sweep = write_sweep(d, steps=30)
    # A learning rate of 1e30 with clipping off sends the weights to inf within a few steps.
    r = amor_run([sweep, "--output", out, "train.lr=1.0e30", "train.clip=0", "train.warmup_steps=0"])
    assert r.returncode == 1, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    assert "loss is" in r.stderr and "last good checkpoint is kept" in r.stderr, r.stderr
    run = run_dir(out)
    assert not os.path.exists(os.path.join(run, "DONE"))
    ckpts = glob.glob(os.path.join(run, "checkpoints", "step-*"))
    assert all(not c.endswith(".partial") for c in ckpts), ckpts



# --- evaluation (issue #8): harness tasks after training, eval-only from weights / checkpoints ---

EVAL = """  eval:
    tasks: [niah_single_1, passkey, ppl_by_position, mqar, lambada]
    niah: {lengths: [512], depths: [0, 100]}
    mqar: {examples: 8}
    lambada: {path: LAMBADA}
    ppl_by_position: {num_sequences: 3}
    tokens_per_task: 2
    batch_size: 2
"""
EVAL_TASKS = {  # task -> (metrics, per-example datasets): the results contract
    "niah_single_1": (["score"], ["score", "length", "depth"]),
    "passkey": (["score"], ["score", "length", "depth"]),
    "ppl_by_position": (["ppl", "ppl_0_32", "ppl_32_64", "ppl_64_96", "ppl_96_128"], ["position", "loss"]),
    "mqar": (["acc"], ["acc"]),
    "lambada": (["acc", "ppl"], ["acc", "logprob"]),
}


def eval_sweep(d, steps=6, extra=""):
    os.makedirs(d, exist_ok=True)
    lambada = os.path.join(d, "lambada_openai.jsonl")
    with open(lambada, "w") as f:  # lm-eval's lambada_openai format: {"text": ...} per line
        for t in ["In the beginning God created the heaven and the earth",
                  "And God said, Let there be light: and there was light",
                  "And the evening and the morning were the first day"]:
            f.write('{"text": "%s"}\n' % t)
    return write_sweep(d, kind="amor", steps=steps,
                       extra=EVAL.replace("LAMBADA", lambada) + extra)


def eval_scores(run):
    with h5py.File(os.path.join(run, "run.h5"), "r") as f:
        return {t: ({m: f["eval"][t].attrs[m] for m in EVAL_TASKS[t][0]},
                    {x: f["eval"][t][x][:] for x in EVAL_TASKS[t][1]}) for t in EVAL_TASKS}


def same_scores(a, b):
    for t in EVAL_TASKS:
        for m in EVAL_TASKS[t][0]:
            x, y = a[t][0][m], b[t][0][m]
            assert (np.isnan(x) and np.isnan(y)) or x == y, (t, m, x, y)
        for x in EVAL_TASKS[t][1]:
            assert np.array_equal(a[t][1][x], b[t][1][x], equal_nan=True), (t, x)


EVAL_OUT = os.path.join(TMP, "eval_trained")


@scenario
def eval_tasks_after_training_write_eval_and_tokens():
    sweep = eval_sweep(os.path.join(TMP, "ev"))
    r = amor_run([sweep, "--output", EVAL_OUT])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = run_dir(EVAL_OUT)
    assert os.path.exists(os.path.join(run, "model.safetensors"))
    with h5py.File(os.path.join(run, "run.h5"), "r") as f:
        for t, (metrics, per_example) in EVAL_TASKS.items():
            g = f["eval"][t]
            assert g.attrs["step"] == 6, (t, g.attrs["step"])
            for m in metrics:
                assert m in g.attrs, (t, m)
            n = {len(g[x]) for x in per_example}
            assert len(n) == 1 and n.pop() > 0, (t, {x: len(g[x]) for x in per_example})
            assert list(g["history/step"][:]) == [6], t
            tok = f["tokens"][t]
            assert len(tok["offsets"]) == 3, (t, tok["offsets"][:])  # tokens_per_task: 2
            total = tok["offsets"][-1]
            assert tok["token_ids"].shape == (total,) and tok["entropy"].shape == (total,)
            assert tok["gate"].shape == (f.attrs["amor_blocks"], total), tok["gate"].shape
            assert np.all((tok["entropy"][:] >= 0) & (tok["entropy"][:] <= 1))
        assert 0 <= f["eval/niah_single_1"].attrs["score"] <= 1
        assert 0 <= f["eval/lambada"].attrs["acc"] <= 1
        assert f["eval/ppl_by_position"].attrs["ppl"] > 1
        # lambada: per-example acc is 0/1 and ppl = exp(-mean logprob)
        lp = f["eval/lambada/logprob"][:]
        assert np.isclose(f["eval/lambada"].attrs["ppl"], np.exp(-lp.mean()))
    # the summary and index.csv show each task's headline metric
    assert "niah_single_1" in r.stdout and "ppl_by_position" in r.stdout, r.stdout[-1500:]
    index = open(os.path.join(EVAL_OUT, "e2e", "index.csv")).read()
    for col in ["niah_single_1_score", "passkey_score", "ppl_by_position_ppl", "lambada_acc", "mqar_acc"]:
        assert col in index.splitlines()[0], index


@scenario
def eval_only_from_weights_same_scores_at_np1_and_np2():
    trained = run_dir(EVAL_OUT)
    weights = os.path.join(trained, "model.safetensors")
    runs = {}
    for np_ in (1, 2):
        out = os.path.join(TMP, f"eval_weights_np{np_}")
        sweep = eval_sweep(os.path.join(TMP, f"ew{np_}"), steps=0, extra=f"    weights: {weights}\n")
        r = amor_run([sweep, "--output", out, f"parallel.ranks_per_run={np_}"], np_=np_)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        # no training loss to report: the done line says so (it used to print "final loss nan")
        assert "done: no training steps, valid loss" in r.stdout + r.stderr, r.stdout[-2000:]
        runs[np_] = run_dir(out)
        with h5py.File(os.path.join(runs[np_], "run.h5"), "r") as f:
            assert f["train/step"].shape == (0,)
            assert f.attrs["world_size"] == np_
    same_scores(eval_scores(runs[1]), eval_scores(runs[2]))


@scenario
def eval_only_from_a_checkpoint_equals_the_trained_run():
    trained = run_dir(EVAL_OUT)
    out = os.path.join(TMP, "eval_ckpt")
    sweep = eval_sweep(os.path.join(TMP, "ec"), steps=0, extra=f"    checkpoint: {trained}\n")
    r = amor_run([sweep, "--output", out, "parallel.ranks_per_run=2"], np_=2)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # the checkpoint holds the final weights and AMOR's thresholds: the trained run's own scores
    same_scores(eval_scores(trained), eval_scores(run_dir(out)))


@scenario
def missing_task_file_fails_that_run_naming_the_file():
    out = os.path.join(TMP, "eval_missing")
    sweep = eval_sweep(os.path.join(TMP, "em"), steps=1)
    missing = os.path.join(TMP, "no_such_lambada.jsonl")
    r = amor_run([sweep, "--output", out, f"eval.lambada.path={missing}"])
    assert r.returncode == 1, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    assert missing in r.stderr and "lambada" in r.stderr, r.stderr[-1000:]
    assert not os.path.exists(os.path.join(run_dir(out), "DONE"))


scenario.finish(TMP)
