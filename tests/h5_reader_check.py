#!/usr/bin/python3
"""Reads amor-run's outputs the way researchers do (h5py, pandas) and checks them against what the
C++ tests wrote (runner/output/run_file_test.cpp, run_file_swmr_test.cpp, sweep_index_test.cpp).

  h5_reader_check.py layout RUN_H5 EXPECTED_JSON
      The file has exactly the layout of design section 6 (runner/output/run_file.h) and holds
      the expected values. EXPECTED_JSON: {"attrs": {...}, "amor_blocks": K, "train": {name:
      [...]}, "eval": {task: {"step", "metrics", "per_example", "history"}}, "tokens": {set:
      {"step", "lengths", "token_ids", "entropy", "loss", "mode", "gate"}}}; null stands for NaN.
  h5_reader_check.py swmr RUN_H5 TIMEOUT_S
      Opens the file with swmr=True while a writer appends (loss = 10 / step) and passes once it
      has watched /train grow at least three times to 20+ rows, all rows consistent.
  h5_reader_check.py hold RUN_H5 READY STOP TIMEOUT_S
      A notebook keeping the file open: opens it with swmr=True, creates READY, waits for STOP
      to appear, then reads /train/step again (refreshed) and prints what it sees.
  h5_reader_check.py index INDEX_CSV EXPECTED_JSON
      pandas reads the CSV back to the expected columns and cells ({"columns": [...], "rows":
      [[...]]}; strings compare exactly, numbers must round-trip exactly, null is an empty cell).
Exit status 0 on success; 1 with a message on the first difference.
"""
import json
import math
import os
import sys
import time

import h5py
import numpy as np

TRAIN_INT = ["step", "tokens"]
TRAIN_FLOAT = ["loss", "lr", "grad_norm", "tokens_per_s", "fire_rate", "tau"]
TRAIN_BLOCK = ["block_fire_rate", "block_tau"]
ROOT_STRINGS = ["config", "config_hash", "sweep", "run_name", "amor_run_version", "git_commit",
                "created", "finished"]
ROOT_INTS = ["world_size", "threads", "amor_blocks", "layout_version"]


class Mismatch(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Mismatch(msg)


def nan_list(values):
    """JSON null -> NaN, recursively, as a float64 array."""
    def conv(v):
        if isinstance(v, list):
            return [conv(x) for x in v]
        return math.nan if v is None else v
    return np.array(conv(values), dtype=np.float64)


def same(name, got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    expect(got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}")
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        ok = np.array_equal(got.astype(np.float64), want.astype(np.float64), equal_nan=True)
    else:
        ok = np.array_equal(got, want)
    expect(ok, f"{name}: {got.tolist()} != expected {want.tolist()}")


def check_dataset(ds, dtype, ndim, compressed=False):
    expect(ds.dtype == np.dtype(dtype), f"{ds.name}: dtype {ds.dtype}, expected {dtype}")
    expect(ds.ndim == ndim, f"{ds.name}: {ds.ndim} dimensions, expected {ndim}")
    expect(ds.chunks is not None, f"{ds.name}: not chunked")
    expect(all(m is None for m in ds.maxshape), f"{ds.name}: not extendible (maxshape {ds.maxshape})")
    if compressed:
        expect(ds.compression == "gzip" and ds.shuffle, f"{ds.name}: not shuffle + gzip")


def check_layout(path, want):
    with h5py.File(path, "r", swmr=True) as f:  # a reader's way in, and proof the file is SWMR-ready
        expect(f.swmr_mode, "file did not open in SWMR mode")
        expect(set(f.keys()) == {"train", "eval", "tokens"}, f"top level: {sorted(f.keys())}")
        expect(set(f.attrs.keys()) == set(ROOT_STRINGS + ROOT_INTS), f"root attrs: {sorted(f.attrs.keys())}")
        for k in ROOT_STRINGS:
            v = f.attrs[k]
            expect(isinstance(v, str), f"attr {k}: {type(v).__name__}, expected str")
            expect(v == want["attrs"][k], f"attr {k}: {v!r} != {want['attrs'][k]!r}")
        for k in ROOT_INTS:
            v = f.attrs[k]
            expect(np.asarray(v).dtype == np.int64, f"attr {k}: dtype {np.asarray(v).dtype}")
            expect(int(v) == want["attrs"][k], f"attr {k}: {v} != {want['attrs'][k]}")
        K = want["amor_blocks"]

        train = f["train"]
        expect(set(train.keys()) == set(TRAIN_INT + TRAIN_FLOAT + TRAIN_BLOCK), f"/train: {sorted(train.keys())}")
        for k in TRAIN_INT:
            check_dataset(train[k], np.int64, 1)
            same(f"/train/{k}", train[k][()], np.array(want["train"][k], dtype=np.int64))
        for k in TRAIN_FLOAT:
            check_dataset(train[k], np.float64, 1)
            same(f"/train/{k}", train[k][()], nan_list(want["train"][k]))
        n = len(want["train"]["step"])
        for k in TRAIN_BLOCK:
            check_dataset(train[k], np.float64, 2)
            same(f"/train/{k}", train[k][()], nan_list(want["train"][k]).reshape(n, K))

        ev = f["eval"]
        expect(set(ev.keys()) == set(want["eval"]), f"/eval: {sorted(ev.keys())}")
        for task, w in want["eval"].items():
            g = ev[task]
            expect(set(g.attrs.keys()) == set(w["metrics"]) | {"step"}, f"/eval/{task} attrs: {sorted(g.attrs.keys())}")
            expect(int(g.attrs["step"]) == w["step"], f"/eval/{task} step {g.attrs['step']} != {w['step']}")
            for m, v in w["metrics"].items():
                same(f"/eval/{task}@{m}", np.float64(g.attrs[m]), nan_list(v))
            expect(set(g.keys()) == set(w["per_example"]) | {"history"}, f"/eval/{task}: {sorted(g.keys())}")
            for d, v in w["per_example"].items():
                check_dataset(g[d], np.float64, 1)
                same(f"/eval/{task}/{d}", g[d][()], nan_list(v).reshape(-1))
            h = g["history"]
            expect(set(h.keys()) == set(w["metrics"]) | {"step"}, f"/eval/{task}/history: {sorted(h.keys())}")
            same(f"/eval/{task}/history/step", h["step"][()], np.array(w["history"]["step"], dtype=np.int64))
            for m in w["metrics"]:
                check_dataset(h[m], np.float64, 1)
                same(f"/eval/{task}/history/{m}", h[m][()], nan_list(w["history"][m]).reshape(-1))

        tok = f["tokens"]
        expect(set(tok.keys()) == set(want["tokens"]), f"/tokens: {sorted(tok.keys())}")
        for name, w in want["tokens"].items():
            g = tok[name]
            p = f"/tokens/{name}"
            expect(set(g.keys()) == {"token_ids", "entropy", "gate", "mode", "loss", "offsets"}, f"{p}: {sorted(g.keys())}")
            expect(int(g.attrs["step"]) == w["step"], f"{p} step {g.attrs['step']} != {w['step']}")
            for k, dt in [("token_ids", np.int32), ("entropy", np.float32), ("mode", np.uint8),
                          ("loss", np.float32), ("offsets", np.int64)]:
                check_dataset(g[k], dt, 1, compressed=True)
            check_dataset(g["gate"], np.uint8, 2, compressed=True)
            total = sum(w["lengths"])
            offsets = np.concatenate([[0], np.cumsum(np.array(w["lengths"], dtype=np.int64))]).astype(np.int64)
            same(f"{p}/offsets", g["offsets"][()], offsets)
            same(f"{p}/token_ids", g["token_ids"][()], np.array(w["token_ids"], dtype=np.int32))
            same(f"{p}/entropy", g["entropy"][()], nan_list(w["entropy"]).astype(np.float32))
            same(f"{p}/loss", g["loss"][()], nan_list(w["loss"]).astype(np.float32))
            same(f"{p}/mode", g["mode"][()], np.array(w["mode"], dtype=np.uint8))
            same(f"{p}/gate", g["gate"][()], np.array(w["gate"], dtype=np.uint8).reshape(K, total))
            # How an analysis notebook slices one sequence out of the flat arrays.
            if len(w["lengths"]) > 1:
                a, b = g["offsets"][1], g["offsets"][2]
                same(f"{p} sequence 1", g["token_ids"][a:b], np.array(w["token_ids"][a:b], dtype=np.int32))


def check_swmr(path, timeout):
    deadline = time.monotonic() + timeout
    f = None
    while f is None:
        try:
            f = h5py.File(path, "r", swmr=True)
        except (OSError, FileNotFoundError):
            expect(time.monotonic() < deadline, f"could not open {path} with swmr=True in {timeout} s")
            time.sleep(0.02)
    with f:
        expect(f.attrs["finished"] == "", f"finished already set: {f.attrs['finished']!r}")
        step, loss = f["train/step"], f["train/loss"]
        seen = []
        while True:
            step.refresh()
            loss.refresh()
            n = min(step.shape[0], loss.shape[0])
            if n and (not seen or n > seen[-1]):
                s = step[:n]
                l = loss[:n]
                expect(np.all(np.diff(s) > 0), f"steps not increasing: {s.tolist()}")
                expect(np.array_equal(l, 10.0 / s), f"loss != 10/step at n = {n}")
                seen.append(n)
            if len(seen) >= 3 and seen[-1] >= 20:
                print(f"swmr: saw /train grow through {seen}")
                return
            expect(time.monotonic() < deadline, f"rows seen within {timeout} s: {seen}")
            time.sleep(0.01)


def hold(path, ready, stop, timeout):
    deadline = time.monotonic() + timeout
    with h5py.File(path, "r", swmr=True) as f:
        before = f["train/step"].shape[0]
        open(ready, "w").close()
        while not os.path.exists(stop):
            expect(time.monotonic() < deadline, f"{stop} did not appear within {timeout} s")
            time.sleep(0.01)
        ds = f["train/step"]
        ds.refresh()
        print(f"hold: /train/step had {before} rows when opened, {ds.shape[0]} at the end")


def check_index(path, want):
    import pandas as pd
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    expect(list(raw.columns) == want["columns"], f"columns {list(raw.columns)} != {want['columns']}")
    expect(len(raw) == len(want["rows"]), f"{len(raw)} rows, expected {len(want['rows'])}")
    for i, row in enumerate(want["rows"]):
        for j, (col, v) in enumerate(zip(want["columns"], row)):
            cell = raw.iloc[i, j]
            if v is None:
                expect(cell == "", f"row {i} {col}: {cell!r}, expected empty")
            elif isinstance(v, str):
                expect(cell == v, f"row {i} {col}: {cell!r} != {v!r}")
            else:
                got = float(cell)  # Python's float() rounds exactly; pandas' fast parser may not
                expect(got == float(v), f"row {i} {col}: {got!r} != {float(v)!r}")


def main():
    mode = sys.argv[1]
    try:
        if mode == "layout":
            with open(sys.argv[3]) as fh:
                check_layout(sys.argv[2], json.load(fh))
        elif mode == "swmr":
            check_swmr(sys.argv[2], float(sys.argv[3]))
        elif mode == "hold":
            hold(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
        elif mode == "index":
            with open(sys.argv[3]) as fh:
                check_index(sys.argv[2], json.load(fh))
        else:
            raise Mismatch(f"unknown mode {mode}")
    except Mismatch as e:
        print(f"h5_reader_check {mode}: {e}", file=sys.stderr)
        return 1
    print(f"h5_reader_check {mode}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
