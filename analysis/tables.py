"""The papers' tables from a Sweep, as DataFrames.

Each table has one row per (scale, model), under any other swept key that varies (e.g. data.source),
averaged over seeds (column `seeds` counts them when a sweep has several). Scores stay fractions
in [0, 1] as run.h5 stores them; `df.attrs["percent"]` lists the columns a paper prints x100
(markdown.py does), and `df.attrs["notes"]` says what was left out and why (a task no run has).

- amor_table: LAMBADA ppl/acc; the multiple-choice accuracies as the Mamba/GDN papers report them
  (HellaSwag acc_norm, PIQA acc, ARC-e acc, ARC-c acc_norm, WinoGrande acc) and their average;
  recall (MQAR acc; NIAH avg = mean score over the niah_* tasks and passkey); LongBench-E buckets
  (each the mean over the longbench_* datasets of score_0_4k / score_4_8k / score_8k_plus) and
  the LongBench average; validation ppl; fire rate (share of gate decisions that fired on the
  validation set, /eval/valid fire_rate; empty for models without gates).
- oryx_table: validation ppl, LAMBADA, MC avg, NIAH avg, LongBench avg, ppl before/after a mixer
  switch (oryx_switch), and the share of tokens whose output came from attention (Oryx: mean of
  /tokens/*/mode over every recorded token; Transformer 1; Mamba2/GDN 0; Serial: share of A in
  the pattern; AMOR and Fused: empty, they are not token-routed between mixers).
- training_summary: per run status, steps, tokens, final loss, validation loss/ppl, median
  tokens/s, wall time, final fire rate.
- gate_by_role: per (token set, run, token role) the share of AMOR gate decisions that fired
  (overall and per block) and the mean normalised entropy, from /tokens/<set>/{role, gate,
  entropy}: does attention fire where recall happens (MQAR queries, the NIAH question)?
"""
import math
from datetime import datetime

import numpy as np
import pandas as pd

MC_TASKS = [("HellaSwag", "hellaswag", "acc_norm"), ("PIQA", "piqa", "acc"),
            ("ARC-e", "arc_easy", "acc"), ("ARC-c", "arc_challenge", "acc_norm"),
            ("WinoGrande", "winogrande", "acc")]
NIAH_TASKS = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
              "niah_multikey_2", "niah_multikey_3", "niah_multivalue", "niah_multiquery", "passkey"]
LB_BUCKETS = [("LB 0-4k", "score_0_4k"), ("LB 4-8k", "score_4_8k"), ("LB 8k+", "score_8k_plus")]
MODEL_ORDER = ["Transformer", "Mamba2", "GDN", "Serial", "Fused", "AMOR", "Oryx"]


def _model_rank(label):
    for i, prefix in enumerate(MODEL_ORDER):
        if label.startswith(prefix):
            return i
    return len(MODEL_ORDER)


def _col(metrics, key):
    return metrics[key] if key in metrics else pd.Series(np.nan, index=metrics.index)


def _row_mean(frame):
    """Mean over columns, NaN where a row lacks any of them (a partial average would mislead)."""
    return frame.mean(axis=1, skipna=False) if frame.shape[1] else pd.Series(np.nan, index=frame.index)


def _tasks_present(metrics, tasks, metric):
    return [t for t in tasks if f"{t}/{metric}" in metrics and metrics[f"{t}/{metric}"].notna().any()]


def _group(sweep, per_run, percent, notes):
    """Joins per-run columns to (scale, model, varying keys), averages seeds, orders rows."""
    frame = sweep.frame().set_index("run")
    keys = sweep.varying_keys()
    base = frame[["scale", "model", "scale_order"] + keys].join(per_run)
    group = keys + ["scale", "model"]  # a varying key (e.g. data.source) splits the table first
    numeric = list(per_run.columns)
    table = base.groupby(group, dropna=False, sort=False).agg(
        {"scale_order": "first", **{c: "mean" for c in numeric}})
    seeds = base.groupby(group, dropna=False, sort=False).size()
    if seeds.max() > 1:
        table["seeds"] = seeds
    table["_model_rank"] = [_model_rank(m) for m in table.index.get_level_values("model")]
    for i, k in enumerate(keys):  # the varying keys' values in first-seen order
        order = {v: j for j, v in enumerate(pd.unique(base[k]))}
        table[f"_key{i}"] = [order.get(v, -1) for v in table.index.get_level_values(k)]
    helpers = [f"_key{i}" for i in range(len(keys))] + ["scale_order", "_model_rank"]
    table = table.sort_values(helpers, kind="stable").drop(columns=helpers)
    empty = [c for c in numeric if table[c].isna().all()]
    if empty:
        notes.append("left out (no run has them): " + ", ".join(empty))
        table = table.drop(columns=empty)
    table.attrs["percent"] = [c for c in percent if c in table.columns]
    table.attrs["notes"] = notes
    return table


def _mc_and_recall(m, cols, percent, notes):
    mc_present = [(label, t, k) for label, t, k in MC_TASKS if f"{t}/{k}" in m and m[f"{t}/{k}"].notna().any()]
    for label, t, k in mc_present:
        cols[label] = _col(m, f"{t}/{k}")
        percent.append(label)
    if mc_present:
        cols["MC avg"] = _row_mean(pd.DataFrame({l: cols[l] for l, _, _ in mc_present}))
        percent.append("MC avg")
        if len(mc_present) < len(MC_TASKS):
            notes.append("MC avg is over " + ", ".join(l for l, _, _ in mc_present) + " only")
    else:
        notes.append("no multiple-choice task (hellaswag, piqa, arc_easy, arc_challenge, winogrande)")
    niah = _tasks_present(m, NIAH_TASKS, "score")
    if niah:
        cols["NIAH avg"] = _row_mean(pd.DataFrame({t: m[f"{t}/score"] for t in niah}))
        percent.append("NIAH avg")
    else:
        notes.append("no NIAH task (niah_*, passkey)")


def _longbench(m, cols, percent, notes, buckets=True):
    lb = sorted({c.split("/")[0] for c in m.columns if c.startswith("longbench_")})
    if not lb:
        notes.append("no LongBench task (longbench_*)")
        return
    if buckets:
        for label, metric in LB_BUCKETS:
            keys = [f"{t}/{metric}" for t in lb if f"{t}/{metric}" in m]
            if keys:
                cols[label] = m[keys].mean(axis=1, skipna=True)  # NaN buckets are empty ones
                percent.append(label)
    cols["LB avg"] = _row_mean(pd.DataFrame({t: _col(m, f"{t}/score") for t in lb}))
    percent.append("LB avg")


def amor_table(sweep):
    m = sweep.metrics()
    cols, percent, notes = {}, [], []
    cols["LAMBADA ppl"] = _col(m, "lambada/ppl")
    cols["LAMBADA acc"] = _col(m, "lambada/acc")
    percent.append("LAMBADA acc")
    _mc_and_recall(m, cols, percent, notes)
    cols["MQAR acc"] = _col(m, "mqar/acc")
    percent.append("MQAR acc")
    # Keep NIAH next to MQAR: both are recall.
    if "NIAH avg" in cols:
        cols["NIAH avg"] = cols.pop("NIAH avg")
    _longbench(m, cols, percent, notes)
    cols["valid ppl"] = _col(m, "valid/ppl")
    cols["fire rate"] = _col(m, "valid/fire_rate")
    percent.append("fire rate")
    return _group(sweep, pd.DataFrame(cols, index=m.index), percent, notes)


def attention_share(run):
    """Share of tokens whose mixer output came from attention (see the module docstring)."""
    cfg = run.config
    kind = cfg.get("model.kind")
    if kind == "transformer":
        return 1.0
    if kind in ("mamba2", "gdn"):
        return 0.0
    if kind == "serial":
        pattern = str(cfg.get("model.pattern", ""))
        return pattern.count("A") / len(pattern) if pattern else math.nan
    if kind == "oryx":
        attn = total = 0
        for name in run.token_sets():
            ts = run.tokens(name)
            if "mode" in ts.fields:
                mode = ts.array("mode")
                attn += int(np.count_nonzero(mode == 1))
                total += mode.size
        return attn / total if total else math.nan
    return math.nan


def oryx_table(sweep):
    frame = sweep.frame()
    if not (frame["kind"] == "oryx").any():
        t = pd.DataFrame()
        t.attrs["notes"] = ["no Oryx run in this sweep (model.kind: oryx)"]
        t.attrs["percent"] = []
        return t
    m = sweep.metrics()
    cols, percent, notes = {}, [], []
    cols["valid ppl"] = _col(m, "valid/ppl")
    cols["LAMBADA ppl"] = _col(m, "lambada/ppl")
    cols["LAMBADA acc"] = _col(m, "lambada/acc")
    percent.append("LAMBADA acc")
    mc = {}
    _mc_and_recall(m, mc, percent, notes)
    for k in ("MC avg", "NIAH avg"):
        if k in mc:
            cols[k] = mc[k]
    _longbench(m, cols, percent, notes, buckets=False)
    cols["ppl before switch"] = _col(m, "oryx_switch/ppl_before")
    cols["ppl after switch"] = _col(m, "oryx_switch/ppl_after")
    cols["attention share"] = pd.Series({n: attention_share(r) for n, r in sweep.runs.items()})
    percent.append("attention share")
    return _group(sweep, pd.DataFrame(cols, index=m.index), percent, notes)


def _minutes(created, finished):
    try:
        a = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ")
        b = datetime.strptime(finished, "%Y-%m-%dT%H:%M:%SZ")
        return (b - a).total_seconds() / 60
    except (TypeError, ValueError):
        return math.nan  # unfinished runs have finished == ""


def training_summary(sweep):
    """One row per run (not averaged), indexed by run name."""
    frame = sweep.frame().set_index("run")
    keys = sweep.varying_keys()
    rows = {}
    for name, run in sweep.runs.items():
        tr = run.train()
        valid = run.metrics("valid")
        last = tr.iloc[-1] if len(tr) else {}
        rows[name] = {
            "steps": int(last["step"]) if len(tr) else 0,
            "tokens": int(last["tokens"]) if len(tr) else 0,
            "final loss": float(last["loss"]) if len(tr) else math.nan,
            "valid loss": valid.get("loss", math.nan),
            "valid ppl": valid.get("ppl", math.nan),
            "tokens/s": float(np.nanmedian(tr["tokens_per_s"])) if len(tr) else math.nan,
            "wall min": _minutes(run.attrs.get("created"), run.attrs.get("finished")),
            "fire rate": float(last["fire_rate"]) if len(tr) and "fire_rate" in tr else math.nan,
        }
    per_run = pd.DataFrame.from_dict(rows, orient="index")
    status = frame[["status"]] if "status" in frame else pd.DataFrame(index=frame.index)
    table = frame[["scale", "model"] + keys].join(status).join(per_run)
    table["_o"] = [(frame.loc[r, "scale_order"], _model_rank(frame.loc[r, "model"])) for r in table.index]
    table = table.sort_values("_o", kind="stable").drop(columns="_o")
    notes = []
    if table["fire rate"].isna().all():
        table = table.drop(columns="fire rate")
    # Runs listed in the index whose run.h5 is missing (failed before starting, or pending).
    if sweep.index is not None:
        missing = [r for r in sweep.index["run"] if r not in sweep.runs]
        if missing:
            notes.append("no run.h5 for: " + ", ".join(missing))
    table.attrs["percent"] = [c for c in ("fire rate",) if c in table.columns]
    table.attrs["notes"] = notes
    return table


# Token roles in the order a table lists them: MQAR's, then the text tasks' from the start of a
# prompt to its end (data/synthetic/token_roles.h); any other name after these.
ROLE_ORDER = ["key", "value", "query", "filler", "other", "haystack", "distractor", "needle", "question",
              "answer"]


def _role_rank(role):
    return ROLE_ORDER.index(role) if role in ROLE_ORDER else len(ROLE_ORDER)


def gate_by_role(sweep):
    """Gate fire rate and entropy by token role: one row per (token set, run, role) over the
    recorded tokens (/tokens/<set>) of every set that holds roles (MQAR's key / value / query /
    filler; NIAH's and passkey's other / haystack / distractor / needle / question / answer; tokens
    of role 'none' left out). Columns: model, tokens (how many), fire rate (share of gate decisions
    that fired over all AMOR blocks), fire b<k> (block k's share), mean entropy (mean normalised
    entropy H / log V of the model's next-token distribution at those tokens). Fire columns are NaN
    for models without gates. Runs in sweep order, token sets in the order first seen."""
    rows, blocks, notes = [], 0, []
    frame = sweep.frame().set_index("run")
    for name, run in sweep.runs.items():
        for set_name in run.token_sets():
            ts = run.tokens(set_name)
            roles = ts.roles()
            if roles is None:
                continue
            present = sorted({r for r in np.unique(roles) if r != "none"}, key=_role_rank)
            if not present:
                continue
            entropy = ts.array("entropy").astype(np.float64)
            gate = ts.array("gate") if ts.blocks else None
            blocks = max(blocks, ts.blocks)
            for role in present:
                m = roles == role
                row = {"token set": set_name, "run": name, "role": role,
                       "model": frame.loc[name, "model"] if name in frame.index else run.model,
                       "tokens": int(np.count_nonzero(m)), "mean entropy": float(entropy[m].mean()),
                       "fire rate": math.nan}
                if gate is not None:
                    g = gate[:, m].astype(np.float64)
                    row["fire rate"] = float(g.mean())
                    for k in range(g.shape[0]):
                        row[f"fire b{k}"] = float(g[k].mean())
                rows.append(row)
    if not rows:
        t = pd.DataFrame()
        t.attrs["notes"] = ["no run recorded token roles (run.h5 /tokens/<set>/role: synthetic tasks "
                            "such as mqar, niah_*, passkey)"]
        t.attrs["percent"] = []
        return t
    fire = ["fire rate"] + [f"fire b{k}" for k in range(blocks)]
    table = pd.DataFrame(rows)
    for c in fire:
        if c not in table:
            table[c] = math.nan
    set_order = {s: i for i, s in enumerate(pd.unique(table["token set"]))}
    run_order = {r: i for i, r in enumerate(sweep.runs)}
    table["_o"] = [(set_order[s], run_order[r], _role_rank(x))
                   for s, r, x in zip(table["token set"], table["run"], table["role"])]
    table = table.sort_values("_o", kind="stable").drop(columns="_o")
    table = table.set_index(["token set", "run", "role"])[["model", "tokens"] + fire + ["mean entropy"]]
    if blocks == 0:
        table = table.drop(columns=fire)
        notes.append("no run has AMOR gates: fire rates left out")
    table.attrs["percent"] = [c for c in fire if c in table.columns]
    table.attrs["notes"] = notes
    return table
