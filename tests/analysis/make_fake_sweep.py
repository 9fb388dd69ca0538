#!/usr/bin/python3
"""Writes a synthetic sweep in exactly amor-run's layout, with every task of the evaluation
contract, so every table and figure of analysis/ has something to show.

Usage: /usr/bin/python3 tests/analysis/make_fake_sweep.py OUT   -> OUT/fake/{index.csv, <run>-<hash8>/run.h5}

Layout: runner/output/run_file.h (root attributes, /train, /eval/<task> with metric attributes,
per-example datasets and history, /tokens/<set>). Runs: two scales (a preset "<kind>-180m" and a
preset-less d64xL2), four models (Transformer, GDN, AMOR-GDN with K=3 gates, Oryx-TG), a second
seed for the small AMOR run, and a failed run listed in index.csv without a run folder. Token sets
valid and lambada (roles all none) and mqar (MQAR's key/value/query/filler roles). Numbers
are random but self-consistent: every metric attribute is the mean of its per-example dataset,
valid's fire_rate is the share of 1s in /tokens/valid/gate, and gates fire where entropy > tau.
"""
import json
import os
import sys

import h5py
import numpy as np

STEPS = 60
K = 3
MC = {"hellaswag": ["acc", "acc_norm"], "piqa": ["acc", "acc_norm"], "arc_easy": ["acc", "acc_norm"],
      "arc_challenge": ["acc", "acc_norm"], "winogrande": ["acc"]}
NIAH = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
        "niah_multikey_3", "niah_multivalue", "niah_multiquery", "passkey"]
LONGBENCH = {"longbench_qasper": 12000, "longbench_trec": 7000}  # max length (trec: no 8k+ bucket)


def config_yaml(cfg, depth=0):
    """The canonical block-YAML form amor-run writes (every leaf is JSON)."""
    out = ""
    for k in sorted(cfg):
        v = cfg[k]
        if isinstance(v, dict):
            out += "  " * depth + k + ":\n" + config_yaml(v, depth + 1)
        else:
            out += "  " * depth + k + ": " + json.dumps(v) + "\n"
    return out


def fnv_hash8(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return "%08x" % (h >> 32)


def write_eval(f, task, metrics, per_example, step=STEPS):
    g = f.create_group("eval/" + task)
    for k, v in metrics.items():
        g.attrs[k] = np.float64(v)
    g.attrs["step"] = np.int64(step)
    for k, v in per_example.items():
        g.create_dataset(k, data=np.asarray(v, dtype=np.float64), maxshape=(None,), chunks=True)
    h = g.create_group("history")
    h.create_dataset("step", data=np.array([step // 2, step], dtype=np.int64), maxshape=(None,), chunks=True)
    for k, v in metrics.items():
        h.create_dataset(k, data=np.array([v * 0.9 if k != "ppl" else v * 1.2, v]), maxshape=(None,), chunks=True)


ROLE_NAMES = ["none", "other", "key", "value", "query", "filler", "needle", "distractor", "haystack", "question",
              "answer"]  # data/synthetic/token_roles.h


def mqar_roles(rng, T, pairs):
    """MQAR's roles of one sequence: key/value over the pairs, `pairs` queries at even offsets after
    them, filler elsewhere (codes of ROLE_NAMES)."""
    roles = np.full(T, 5, np.uint8)
    roles[0:2 * pairs:2], roles[1:2 * pairs:2] = 2, 3
    gaps = rng.choice((T - 2 * pairs) // 2, pairs, replace=False)
    roles[2 * pairs + 2 * gaps] = 4
    return roles


def write_tokens(f, name, lengths, rng, kind, tau, quality, mqar=False):
    total = int(sum(lengths))
    g = f.create_group("tokens/" + name)
    g.attrs["step"] = np.int64(STEPS)
    kw = dict(chunks=True, shuffle=True, compression="gzip")
    entropy = np.clip(rng.beta(2, 4, total) * (1.2 - 0.4 * quality), 0, 1).astype(np.float32)
    loss = (entropy * 6 + rng.normal(0, 0.2, total)).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    loss[offsets[1:] - 1] = np.nan  # the last token of a sequence has no target
    g.create_dataset("token_ids", data=rng.integers(0, 260, total).astype(np.int32), maxshape=(None,), **kw)
    g.create_dataset("entropy", data=entropy, maxshape=(None,), **kw)
    g.create_dataset("loss", data=loss, maxshape=(None,), **kw)
    mode = np.zeros(total, np.uint8)
    if kind == "oryx":  # 16-token chunks, attention (1) with probability 0.4
        chunks = rng.random(total // 16 + 1) < 0.4
        mode = np.repeat(chunks, 16)[:total].astype(np.uint8)
    g.create_dataset("mode", data=mode, maxshape=(None,), **kw)
    k = K if kind == "amor" else 0
    # Block k fires where the entropy exceeds its threshold (later blocks a little higher).
    gate = np.stack([(entropy > tau + 0.02 * b) for b in range(k)]).astype(np.uint8) if k else np.zeros((0, total), np.uint8)
    g.create_dataset("gate", data=gate, maxshape=(k, None), **kw)
    roles = (np.concatenate([mqar_roles(rng, n, 8) for n in lengths]) if mqar
             else np.zeros(total, np.uint8))
    r = g.create_dataset("role", data=roles, maxshape=(None,), **kw)
    r.attrs.create("names", ROLE_NAMES, dtype=h5py.string_dtype())
    g.create_dataset("offsets", data=offsets, maxshape=(None,), chunks=True)
    return gate


def make_run(sweep_dir, sweep, name, kind, preset, d_model, n_layers, seed):
    rng = np.random.default_rng(seed * 1000 + len(name) * 7 + d_model)  # deterministic per run
    cfg = {"model": {"kind": kind, "preset": preset, "d_model": d_model, "n_layers": n_layers,
                     "vocab": 260, "amor": {"backbone": "gdn", "blocks": K, "kappa": 0.2},
                     "oryx": {"linear": "gdn", "chunk": 16, "p_attention": 0.4}},
           "data": {"source": "corpus", "seq_len": 64}, "eval": {"tasks": ["lambada", "mqar"]},
           "train": {"seed": seed, "steps": STEPS}, "device": "cpu"}
    text = config_yaml(cfg)
    h8 = fnv_hash8(text)
    run_dir = os.path.join(sweep_dir, f"{name}-{h8}")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.yaml"), "w") as fh:
        fh.write(text)
    quality = {"transformer": 0.6, "gdn": 0.5, "amor": 0.7, "oryx": 0.65}[kind] + (0.1 if preset else 0)
    with h5py.File(os.path.join(run_dir, "run.h5"), "w", libver="latest") as f:
        for k, v in dict(config=text, config_hash=h8, sweep=sweep, run_name=name, amor_run_version="0.1.0",
                         git_commit="fake", created="2025-01-01T00:00:00Z", finished="2025-01-01T00:12:30Z").items():
            f.attrs[k] = v
        f.attrs["world_size"] = np.int64(2)
        f.attrs["amor_blocks"] = np.int64(K if kind == "amor" else 0)
        f.attrs["layout_version"] = np.int64(1)
        steps = np.arange(1, STEPS + 1)
        train = {"step": steps, "tokens": steps * 512,
                 "loss": 5.5 * np.exp(-steps / 25) + 3 - quality + rng.normal(0, 0.05, STEPS),
                 "lr": np.minimum(steps / 5, 1) * 1e-3, "grad_norm": 1 + rng.random(STEPS),
                 "tokens_per_s": 4000 + 100 * rng.random(STEPS)}
        k = K if kind == "amor" else 0
        tau = 0.3 + 0.05 * (1 - np.exp(-steps / 10))
        block_tau = np.stack([tau + 0.02 * b for b in range(k)], 1) if k else np.zeros((STEPS, 0))
        block_fire = np.clip(0.5 - block_tau + rng.normal(0, 0.02, block_tau.shape), 0, 1)
        train["fire_rate"] = block_fire.mean(1) if k else np.full(STEPS, np.nan)
        train["tau"] = block_tau[:, -1] if k else np.full(STEPS, np.nan)
        train["block_fire_rate"], train["block_tau"] = block_fire, block_tau
        for key, v in train.items():
            v = np.asarray(v)
            dt = np.int64 if key in ("step", "tokens") else np.float64
            f.create_dataset("train/" + key, data=v.astype(dt), maxshape=(None,) + v.shape[1:], chunks=True)
        # Token records first: valid's fire rate is measured from its gates.
        final_tau = float(tau[-1])
        gate = write_tokens(f, "valid", [64] * 8, rng, kind, final_tau, quality)
        write_tokens(f, "lambada", [30, 45, 52, 38], rng, kind, final_tau, quality)
        write_tokens(f, "mqar", [64] * 4, rng, kind, final_tau, quality, mqar=True)
        valid_loss = 3.2 - quality
        write_eval(f, "valid", {"loss": valid_loss, "ppl": np.exp(valid_loss),
                                "fire_rate": gate.mean() if k else np.nan}, {})
        write_eval(f, "memory", {"param_bytes": 1e6, "world_size": 2}, {})
        acc = (rng.random(64) < quality).astype(float)
        write_eval(f, "mqar", {"acc": acc.mean()}, {"acc": acc})
        acc = (rng.random(50) < quality * 0.6).astype(float)
        logprob = -rng.gamma(2, 2, 50)
        write_eval(f, "lambada", {"acc": acc.mean(), "ppl": np.exp(-logprob.mean())}, {"acc": acc, "logprob": logprob})
        for task, metrics in MC.items():
            per = {m: (rng.random(40) < 0.3 + 0.4 * quality).astype(float) for m in metrics}
            write_eval(f, task, {m: per[m].mean() for m in metrics}, per)
        lengths, depths = np.array([1024, 2048, 4096]), np.linspace(0, 1, 5)
        L, D = [a.ravel() for a in np.meshgrid(lengths, depths, indexing="ij")]
        L, D = np.repeat(L, 2).astype(float), np.repeat(D, 2)
        for task in NIAH:
            p = np.clip(quality + 0.3 - L / 8192 - 0.2 * np.sin(np.pi * D), 0, 1)
            score = (rng.random(L.size) < p).astype(float)
            write_eval(f, task, {"score": score.mean()}, {"score": score, "length": L, "depth": D})
        for task, max_len in LONGBENCH.items():
            length = rng.integers(500, max_len, 30).astype(float)
            score = np.clip(rng.normal(quality * 0.5, 0.1, 30), 0, 1)
            buckets = {"score_0_4k": length < 4000, "score_4_8k": (length >= 4000) & (length < 8000),
                       "score_8k_plus": length >= 8000}
            metrics = {"score": score.mean(), **{b: score[m].mean() if m.any() else np.nan for b, m in buckets.items()}}
            write_eval(f, task, metrics, {"score": score, "length": length})
        pos = np.arange(0, 2048, 256).astype(float)
        loss = 3.5 - quality + 0.1 * np.log1p(pos / 256) + (0.5 * (pos >= 1024) if kind != "transformer" else 0)
        write_eval(f, "ppl_by_position", {"ppl": np.exp(loss.mean()),
                                          **{f"ppl_{int(a)}_{int(a) + 256}": np.exp(l) for a, l in zip(pos, loss)}},
                   {"position": pos, "loss": loss})
        if kind == "oryx":
            off = np.arange(-64, 64).astype(float)
            loss = 2.5 - quality + np.where(off < 0, 0.0, 0.3 * np.exp(-off / 16)) + rng.normal(0, 0.02, off.size)
            write_eval(f, "oryx_switch", {"ppl_before": np.exp(loss[off < 0].mean()),
                                          "ppl_after": np.exp(loss[off >= 0].mean())}, {"offset": off, "loss": loss})
    open(os.path.join(run_dir, "DONE"), "w").close()
    return {"run": name, "hash": h8, "status": "done", "model.kind": kind, "model.preset": preset,
            "train.seed": seed, "final_loss": train["loss"][-1], "valid_loss": valid_loss,
            "fire_rate": gate.mean() if k else np.nan}


def make_fake_sweep(out, sweep="fake"):
    sweep_dir = os.path.join(out, sweep)
    os.makedirs(sweep_dir, exist_ok=True)
    rows = []
    for size, d, n in [("", 64, 2), ("180m", 768, 12)]:
        for kind in ["transformer", "gdn", "amor", "oryx"]:
            preset = f"{kind}-{size}" if size else ""
            seeds = [0, 1] if (kind == "amor" and not size) else [0]
            for seed in seeds:
                name = f"{kind}-{size or 'small'}-seed{seed}"
                rows.append(make_run(sweep_dir, sweep, name, kind, preset, d, n, seed))
    rows.append({"run": "gdn-broken-seed0", "hash": "deadbeef", "status": "failed", "model.kind": "gdn",
                 "model.preset": "", "train.seed": 0, "error": "fake failure, no run folder"})
    cols = ["run", "hash", "status", "model.kind", "model.preset", "train.seed", "final_loss",
            "valid_loss", "fire_rate", "error"]
    with open(os.path.join(sweep_dir, "index.csv"), "w") as fh:
        fh.write(",".join(cols) + "\n")
        for r in rows:
            cells = []
            for c in cols:
                v = r.get(c, "")
                v = "nan" if isinstance(v, float) and np.isnan(v) else str(v)
                cells.append('"' + v.replace('"', '""') + '"' if ("," in v or '"' in v) else v)  # RFC 4180
            fh.write(",".join(cells) + "\n")
    return sweep_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(make_fake_sweep(sys.argv[1]))
