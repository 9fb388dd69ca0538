#!/usr/bin/python3
"""Tests of analysis/ (issue #9): loaders and tables against values computed here from the raw
HDF5, the report command, and every notebook executed with nbconvert, on a synthetic sweep with
every task of the contract (make_fake_sweep.py) and on a fresh quickstart sweep run by amor-run.

Usage: /usr/bin/python3 tests/analysis/test_analysis.py BUILD_BIN_DIR SOURCE_DIR
(AMOR_ANALYSIS_KEEP=1 keeps the temporary folder and prints its path.)
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

BIN = os.path.abspath(sys.argv[1])
SRC = os.path.abspath(sys.argv[2])
sys.argv[1:] = sys.argv[3:]  # the rest goes to unittest
sys.path.insert(0, SRC)
sys.path.insert(0, os.path.join(SRC, "tests", "analysis"))

from analysis import fig_evals, load_sweep, tables  # noqa: E402
from analysis.config_text import flatten, parse_config  # noqa: E402
from make_fake_sweep import make_fake_sweep  # noqa: E402

TMP = tempfile.mkdtemp(prefix="amor_analysis_")
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", AMOR_PROGRESS="plain", PYTHONPATH=SRC,
           MPLBACKEND="Agg", PYDEVD_DISABLE_FILE_VALIDATION="1")
NOTEBOOKS = sorted(glob.glob(os.path.join(SRC, "analysis", "notebooks", "*.ipynb")))
FAKE = REAL = None


def setUpModule():
    global FAKE, REAL
    FAKE = make_fake_sweep(TMP)
    out = os.path.join(TMP, "real")
    # The quick start, shortened: every model family, both data sources, on 2 ranks.
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", os.path.join(BIN, "amor-run"),
           os.path.join(SRC, "experiments", "quickstart.yaml"), "train.steps=20", "data.mqar.num_valid=32",
           "--output", out, "-q"]
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"amor-run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    REAL = os.path.join(out, "quickstart")


def tearDownModule():
    if os.environ.get("AMOR_ANALYSIS_KEEP"):
        print("kept", TMP)
    else:
        shutil.rmtree(TMP, ignore_errors=True)


def h5_attrs(path, group):
    with h5py.File(path, "r") as f:
        return {k: float(v) for k, v in f[group].attrs.items()} if group in f else {}


def h5_array(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def read(path):
    with open(path) as f:
        return f.read()


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


class FakeSweepTables(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sweep = load_sweep(FAKE)
        cls.paths = {n: r.path for n, r in cls.sweep.runs.items()}

    def rows_of(self, scale, model):
        return [n for n, r in self.sweep.runs.items() if r.scale == scale and r.model == model]

    def test_runs_and_identity(self):
        s = self.sweep
        self.assertEqual(len(s.runs), 9)  # the failed run has no folder
        self.assertNotIn("gdn-broken-seed0", s.runs)
        self.assertEqual(s.runs["amor-180m-seed0"].scale, "180M")
        self.assertEqual(s.runs["amor-small-seed1"].scale, "d64xL2")
        self.assertEqual(s.runs["oryx-small-seed0"].model, "Oryx-TG")
        self.assertEqual(s.runs["amor-small-seed0"].amor_blocks, 3)
        self.assertEqual(s.varying_keys(), [])  # kind, preset and seed make up the rows

    def test_config_round_trip(self):
        for run in self.sweep.runs.values():
            text = read(os.path.join(os.path.dirname(run.path), "config.yaml"))
            self.assertEqual(run.config, flatten(parse_config(text)))
            self.assertEqual(run.config["train.steps"], 60)
        with self.assertRaisesRegex(ValueError, "line 2"):
            parse_config("model:\n  kind: amor\n")

    def test_mc_average_niah_and_fire_rate(self):
        table = tables.amor_table(self.sweep)
        mc = [("hellaswag", "acc_norm"), ("piqa", "acc"), ("arc_easy", "acc"), ("arc_challenge", "acc_norm"),
              ("winogrande", "acc")]
        niah = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
                "niah_multikey_3", "niah_multivalue", "niah_multiquery", "passkey"]
        self.assertEqual(len(table), 8)  # 2 scales x 4 models; the AMOR seeds are averaged
        for (scale, model), row in table.iterrows():
            runs = self.rows_of(scale, model)
            exp_mc = np.mean([np.mean([h5_attrs(self.paths[r], "eval/" + t)[m] for t, m in mc]) for r in runs])
            self.assertAlmostEqual(row["MC avg"], exp_mc, places=12)
            exp_niah = np.mean([np.mean([h5_attrs(self.paths[r], "eval/" + t)["score"] for t in niah]) for r in runs])
            self.assertAlmostEqual(row["NIAH avg"], exp_niah, places=12)
            # Fire rate from the gate arrays themselves: the share of 1s over blocks and tokens.
            gates = [h5_array(self.paths[r], "tokens/valid/gate") for r in runs]
            if model.startswith("AMOR"):
                self.assertAlmostEqual(row["fire rate"], np.mean([g.mean() for g in gates]), places=12)
            else:
                self.assertTrue(np.isnan(row["fire rate"]))
            lb = {}
            for t in ("longbench_qasper", "longbench_trec"):
                for k, v in h5_attrs(self.paths[runs[0]], "eval/" + t).items():
                    lb.setdefault(k, []).append(v)
            if len(runs) == 1:  # buckets: mean over datasets that have the bucket (trec has no 8k+)
                self.assertAlmostEqual(row["LB 8k+"], np.nanmean(lb["score_8k_plus"]), places=12)
                self.assertAlmostEqual(row["LB 0-4k"], np.mean(lb["score_0_4k"]), places=12)
        self.assertEqual(table.loc[("d64xL2", "AMOR-GDN"), "seeds"], 2)
        self.assertEqual(list(table.index.get_level_values("scale")[:4]), ["d64xL2"] * 4)  # small first
        self.assertEqual(list(table.index.get_level_values("model")[:4]),
                         ["Transformer", "GDN", "AMOR-GDN", "Oryx-TG"])

    def test_oryx_attention_share(self):
        table = tables.oryx_table(self.sweep)
        for (scale, model), row in table.iterrows():
            run = self.rows_of(scale, model)[0]
            if model.startswith("Oryx"):
                modes = [h5_array(self.paths[run], f"tokens/{s}/mode") for s in ("valid", "lambada", "mqar")]
                expected = sum((m == 1).sum() for m in modes) / sum(m.size for m in modes)
                self.assertAlmostEqual(row["attention share"], expected, places=12)
                sw = h5_attrs(self.paths[run], "eval/oryx_switch")
                self.assertAlmostEqual(row["ppl after switch"], sw["ppl_after"], places=12)
            elif model == "Transformer":
                self.assertEqual(row["attention share"], 1.0)
            elif model == "GDN":
                self.assertEqual(row["attention share"], 0.0)

    def test_gate_by_role(self):
        table = tables.gate_by_role(self.sweep)
        # Only the mqar set holds roles (valid and lambada are all 'none'); every run has it.
        self.assertEqual(set(table.index.get_level_values("token set")), {"mqar"})
        self.assertEqual(list(table.index.get_level_values("run").unique()), list(self.sweep.runs))
        self.assertEqual(table.attrs["percent"], ["fire rate", "fire b0", "fire b1", "fire b2"])
        names = [n.decode() if isinstance(n, bytes) else n
                 for n in h5py.File(self.paths["amor-small-seed0"], "r")["tokens/mqar/role"].attrs["names"]]
        for run, path in self.paths.items():
            roles = np.asarray(names, dtype=object)[h5_array(path, "tokens/mqar/role")]
            entropy = h5_array(path, "tokens/mqar/entropy").astype(np.float64)
            gate = h5_array(path, "tokens/mqar/gate")
            got = table.xs(run, level="run").loc["mqar"]
            self.assertEqual(list(got.index), ["key", "value", "query", "filler"])  # ROLE_ORDER
            for role, row in got.iterrows():
                m = roles == role
                self.assertEqual(row["tokens"], m.sum())
                self.assertAlmostEqual(row["mean entropy"], entropy[m].mean(), places=12)
                if gate.shape[0]:
                    self.assertAlmostEqual(row["fire rate"], gate[:, m].mean(), places=12)
                    for k in range(gate.shape[0]):
                        self.assertAlmostEqual(row[f"fire b{k}"], gate[k, m].mean(), places=12)
                else:
                    self.assertTrue(np.isnan(row["fire rate"]) and np.isnan(row["fire b0"]))
            self.assertEqual(got.loc["query", "tokens"], 4 * 8)  # 4 sequences x 8 queries

    def test_training_summary(self):
        table = tables.training_summary(self.sweep)
        self.assertEqual(len(table), 9)
        for run, row in table.iterrows():
            loss = h5_array(self.paths[run], "train/loss")
            self.assertEqual(row["final loss"], loss[-1])
            self.assertEqual(row["steps"], 60)
        self.assertAlmostEqual(table.loc["amor-180m-seed0", "wall min"], 12.5)
        self.assertTrue(any("gdn-broken-seed0" in n for n in table.attrs["notes"]))

    def test_token_sets_and_examples(self):
        run = self.sweep.runs["amor-small-seed0"]
        ts = run.tokens("lambada")
        offsets = h5_array(run.path, "tokens/lambada/offsets")
        self.assertEqual(len(ts), len(offsets) - 1)
        seq = ts.sequence(2)
        a, b = offsets[2], offsets[3]
        np.testing.assert_array_equal(seq["entropy"], h5_array(run.path, "tokens/lambada/entropy")[a:b])
        self.assertEqual(seq["gate"].shape, (3, b - a))
        frame = ts.frame()
        self.assertEqual(len(frame), offsets[-1])
        self.assertEqual(frame.loc[a, "position"], 0)
        self.assertEqual(frame.loc[b - 1, "position"], b - a - 1)
        with self.assertRaises(IndexError):
            ts.sequence(len(ts))
        ex = run.examples("niah_single_1")
        self.assertEqual(list(ex.columns), ["depth", "length", "score"])
        self.assertTrue(run.examples("no_such_task").empty)
        self.assertEqual(run.metrics("no_such_task"), {})

    def test_niah_grid(self):
        run = self.sweep.runs["gdn-180m-seed0"]
        grid = fig_evals.niah_grid(run)
        tasks = [t for t in run.tasks() if t.startswith("niah_") or t == "passkey"]
        self.assertEqual(len(tasks), 9)
        L = np.concatenate([h5_array(run.path, f"eval/{t}/length") for t in tasks])
        D = np.concatenate([h5_array(run.path, f"eval/{t}/depth") for t in tasks])
        S = np.concatenate([h5_array(run.path, f"eval/{t}/score") for t in tasks])
        for length in np.unique(L):
            for depth in np.unique(D):
                m = (L == length) & (D == depth)
                self.assertAlmostEqual(grid.loc[length, depth], S[m].mean(), places=12)

    def test_sweep_without_index(self):
        d = os.path.join(TMP, "noindex", "fake")
        shutil.copytree(FAKE, d)
        os.remove(os.path.join(d, "index.csv"))
        s = load_sweep(d)
        self.assertEqual(len(s.runs), 9)
        self.assertEqual(len(tables.amor_table(s)), 8)


class RealSweep(unittest.TestCase):
    def test_loads_and_degrades(self):
        s = load_sweep(REAL)
        self.assertEqual(len(s.runs), 10)
        self.assertEqual(s.varying_keys(), ["data.source"])
        for name, run in s.runs.items():
            # run.h5's config attribute reads back as the run's config.json says
            cfg = json.loads(read(os.path.join(os.path.dirname(run.path), "config.json")))
            self.assertEqual(run.config, flatten(cfg), name)
        amor = tables.amor_table(s)
        self.assertEqual(len(amor), 10)
        self.assertNotIn("LAMBADA acc", amor.columns)
        self.assertTrue(any("LAMBADA" in n for n in amor.attrs["notes"]))
        for (source, scale, model), row in amor.iterrows():
            run = next(r for r in s.runs.values() if r.model == model and r.config["data.source"] == source)
            expected = h5_attrs(run.path, "eval/valid")["fire_rate"]
            if model.startswith("AMOR"):
                self.assertTrue(0 <= expected <= 1)
                self.assertEqual(row["fire rate"], expected)
                self.assertEqual(run.tokens("valid").blocks, 1)
            else:
                self.assertTrue(np.isnan(row["fire rate"]) and np.isnan(expected))
            self.assertEqual(row["valid ppl"], h5_attrs(run.path, "eval/valid")["ppl"])
        self.assertTrue(tables.oryx_table(s).empty)

    def test_token_roles_recorded(self):
        """run.h5 labels the synthetic tasks' tokens: MQAR's layout (queries exactly where a
        target is scored, i.e. the loss is finite), and NIAH / passkey needles and questions that
        decode (byte tokenizer) to the generators' sentences; the role table matches the raw
        arrays."""
        s = load_sweep(REAL)
        pairs = 4  # quickstart's data.mqar.num_kv_pairs
        checked = set()
        for name, run in s.runs.items():
            for set_name in run.token_sets():
                ts = run.tokens(set_name)
                self.assertEqual(ts.role_names[:6], ["none", "other", "key", "value", "query", "filler"])
                roles = ts.roles()
                self.assertEqual(len(roles), ts.total)
                if set_name == "ppl_by_position" or (set_name == "valid" and run.config["data.source"] == "corpus"):
                    self.assertTrue((roles == "none").all(), (name, set_name))
                    continue
                loss = ts.array("loss")
                ids = ts.array("token_ids")
                for i in range(len(ts)):
                    a, b = int(ts.offsets[i]), int(ts.offsets[i + 1])
                    r = roles[a:b]
                    if set_name in ("valid", "mqar"):
                        self.assertEqual(list(r[:2 * pairs]), ["key", "value"] * pairs)
                        np.testing.assert_array_equal(r[2 * pairs:] == "query", np.isfinite(loss[a + 2 * pairs:b]))
                        self.assertTrue(set(r[2 * pairs:]) <= {"query", "filler"})
                        checked.add("mqar")
                    else:
                        text = lambda role: bytes(ids[a:b][r == role].astype(np.uint8)).decode()  # noqa: E731
                        self.assertEqual(r[0], "other")
                        if set_name == "passkey":
                            self.assertRegex(text("needle"), r"^The pass key is (\d+)\. Remember it\. \1 is the pass key\.$")
                            self.assertEqual(text("question"), "\nWhat is the pass key? The pass key is")
                        else:
                            self.assertRegex(text("needle"), r"^One of the special magic numbers for [a-z-]+ is: \d+\.$")
                            self.assertTrue(text("question").startswith("\nWhat is the special magic number for "))
                        self.assertTrue(set(r) <= {"other", "haystack", "needle", "question", "answer"})
                        checked.add(set_name)
        self.assertEqual(checked, {"mqar", "niah_single_1", "passkey"})
        table = tables.gate_by_role(s)
        amor = next(n for n, r in s.runs.items() if r.amor_blocks and r.config["data.source"] == "mqar")
        ts = s.runs[amor].tokens("valid")
        roles, gate = ts.roles(), ts.array("gate")
        for role in ("key", "value", "query", "filler"):
            self.assertAlmostEqual(table.loc[("valid", amor, role), "fire rate"], gate[:, roles == role].mean(), places=12)


class ReportAndNotebooks(unittest.TestCase):
    def report(self, sweep_dir, name):
        out = os.path.join(TMP, "report_" + name)
        r = subprocess.run([sys.executable, "-m", "analysis", "report", sweep_dir, "--out", out],
                           env=ENV, capture_output=True, text=True, timeout=600, cwd=TMP)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        md = read(os.path.join(out, "report.md"))
        self.assertIn("## AMOR table", md)
        self.assertIn("| scale | model |", md)
        self.assertTrue(os.path.getsize(os.path.join(out, "report.html")) > 2000)
        pngs = sorted(glob.glob(os.path.join(out, "figures", "*.png")))
        for p in pngs:
            w, h = png_size(p)
            self.assertGreater(os.path.getsize(p), 15000, p)
            self.assertTrue(w >= 600 and h >= 400, f"{p}: {w}x{h}")
            self.assertIn(f"figures/{os.path.basename(p)}", md)
        return md, [os.path.basename(p) for p in pngs]

    def test_report_on_a_folder_that_is_not_a_sweep(self):
        # results/ instead of results/<sweep>: a message naming the sweep inside, exit 2, no traceback
        r = subprocess.run([sys.executable, "-m", "analysis", "report", os.path.dirname(FAKE),
                            "--out", os.path.join(TMP, "report_parent")],
                           env=ENV, capture_output=True, text=True, timeout=600, cwd=TMP)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("is not a sweep folder", r.stderr)
        self.assertIn(os.path.basename(FAKE), r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_report_fake(self):
        md, pngs = self.report(FAKE, "fake")
        self.assertEqual(len(pngs), 9, pngs)
        self.assertIn("## Gate and entropy by token role", md)
        self.assertIn("| token set | run | role | model | tokens | fire rate (%) |", md)
        self.assertIn("## Oryx table", md)
        self.assertNotIn("Skipped", md)

    def test_report_real(self):
        md, pngs = self.report(REAL, "real")
        # The quickstart evaluates niah_single_1, passkey and ppl_by_position: their figures are
        # drawn; it has no Oryx run and no file-based task, which the report says.
        for p in ("loss_curves.png", "fire_rate_threshold.png", "entropy_fired_skipped.png",
                  "gate_rate_by_position.png", "gate_rate_by_task.png", "niah_heatmaps.png",
                  "ppl_by_position.png", "fire_rate_by_role.png"):
            self.assertIn(p, pngs)
        self.assertIn("_Skipped: no Oryx run", md)
        self.assertIn("## Gate and entropy by token role", md)
        for role in ("| query |", "| filler |", "| needle |", "| question |"):
            self.assertIn(role, md)
        self.assertIn("no multiple-choice task", md)

    def run_notebooks(self, sweep_dir, name):
        out = os.path.join(TMP, "nb_" + name)
        env = dict(ENV, AMOR_SWEEP_DIR=sweep_dir)
        env.pop("MPLBACKEND")  # the kernel draws inline
        r = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
                            "--ExecutePreprocessor.kernel_name=python3", "--ExecutePreprocessor.timeout=300",
                            "--output-dir", out] + NOTEBOOKS, env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-5000:])
        images = 0
        for nb_path in NOTEBOOKS:
            nb = json.loads(read(os.path.join(out, os.path.basename(nb_path))))
            outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
            self.assertFalse([o for o in outputs if o["output_type"] == "error"])
            images += sum("image/png" in o.get("data", {}) for o in outputs)
            # The kernel that ran is this interpreter (setup cell prints sys.executable).
            first = "".join(outputs[0].get("text", ""))
            self.assertEqual(os.path.realpath(first.split()[0]), os.path.realpath(sys.executable), first)
        return images

    def test_notebooks(self):
        self.assertEqual(len(NOTEBOOKS), 2)
        self.assertEqual(self.run_notebooks(FAKE, "fake"), 9)  # 8 figures + the scatter
        self.assertGreaterEqual(self.run_notebooks(REAL, "real"), 6)


if __name__ == "__main__":
    unittest.main(verbosity=2)
