#!/usr/bin/python3
"""Independent oracle: recompute every op case written by oracle_dump with PyTorch autograd.

Usage: /usr/bin/python3 tests/torch_oracle.py CASE_DIR [--only OP]

For each case folder (see tests/common/oracle.h) this loads the inputs, runs the op's formula from
tests/oracle/<op>.py in the case's dtype, compares every output our C++ wrote, then back-propagates
L = sum_k <dout_k, out_k> with torch.autograd and compares every input gradient our C++ wrote.
Error is rms(ours - torch) / rms(torch); limits: f64 1e-10, f32 1e-5 (ISSUE #2).
Exit status 0 only if every case passed and at least one case ran.
"""
import argparse
import importlib
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref.compare import rel_rms  # noqa: E402

TOLERANCE = {"f64": 1e-10, "f32": 1e-5}
TORCH_DTYPE = {"f64": torch.float64, "f32": torch.float32}




def load_case(path):
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    dt = TORCH_DTYPE[meta["dtype"]]

    def load(prefix, name):
        a = np.load(os.path.join(path, f"{prefix}_{name}.npy"))
        t = torch.from_numpy(np.ascontiguousarray(a))
        if t.is_floating_point():
            t = t.to(dt)
        elif t.dtype != torch.uint8:
            t = t.to(torch.int64)
        return t

    inputs = {n: load("in", n) for n in meta["inputs"]}
    outputs = {n: load("out", n) for n in meta["outputs"]}
    douts = {n: load("dout", n) for n in meta["grad_outs"]}
    grads = {n: load("grad", n) for n in meta["grad_ins"]}
    return meta, inputs, outputs, douts, grads


def check_case(path):
    meta, inputs, outputs, douts, grads = load_case(path)
    module = importlib.import_module("oracle." + meta["op"])
    tol = TOLERANCE[meta["dtype"]]
    for n in grads:
        inputs[n].requires_grad_(True)
    ref = module.forward(inputs, meta["params"])
    failures, worst = [], 0.0
    for n, ours in outputs.items():
        if n not in ref:
            failures.append(f"oracle computes no output '{n}'")
            continue
        e = rel_rms(ours, ref[n])
        worst = max(worst, e)
        if e > tol:
            failures.append(f"output '{n}' rel.rms {e:.3g} > {tol:g}")
    if grads:
        loss = sum((ref[n].to(douts[n].dtype) * douts[n]).sum() for n in douts)
        want = [inputs[n] for n in grads]
        got = torch.autograd.grad(loss, want, allow_unused=True)
        for (n, ours), g in zip(grads.items(), got):
            if g is None:
                g = torch.zeros_like(inputs[n])
            e = rel_rms(ours, g)
            worst = max(worst, e)
            if e > tol:
                failures.append(f"grad '{n}' rel.rms {e:.3g} > {tol:g}")
    return meta, worst, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case_dir")
    ap.add_argument("--only", help="check only this op")
    args = ap.parse_args()
    torch.manual_seed(0)
    cases = sorted(d for d in os.listdir(args.case_dir)
                   if os.path.isfile(os.path.join(args.case_dir, d, "meta.json")))
    passed = failed = 0
    for d in cases:
        path = os.path.join(args.case_dir, d)
        if args.only:
            with open(os.path.join(path, "meta.json")) as f:
                if json.load(f)["op"] != args.only:
                    continue
        try:
            meta, worst, failures = check_case(path)
        except Exception as e:  # a broken case is a failure, reported with its name
            print(f"FAIL {d}: {type(e).__name__}: {e}")
            failed += 1
            continue
        if failures:
            failed += 1
            print(f"FAIL {d}: " + "; ".join(failures))
        else:
            passed += 1
            print(f"ok   {d}  (worst rel.rms {worst:.2e}, {meta['dtype']})")
    print(f"torch_oracle: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
