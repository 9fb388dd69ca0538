#!/usr/bin/python3
"""Check the C++ Gated DeltaNet mixer against tests/torch_ref/gdn.py on the same weights.

Usage: /usr/bin/python3 tests/gdn_check.py CASE_DIR
CASE_DIR (written by models/mixers/gdn_mixer_test.cpp) holds
    config.json          the ModelConfig (to_json), "prefix": the mixer's parameter prefix
    weights.safetensors  the mixer's parameters (double)
    case.safetensors     x, dy (the output gradient handed to backward), and ours: y, dx
    grads.safetensors    grad.<param name>: our parameter gradients
The reference output and, by autograd of sum(y * dy), the gradients of x and of every parameter
must agree with ours to relative RMS 1e-10. Exit status 0 when they do.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from torch_ref.compare import rel_rms  # noqa: E402
from torch_ref import gdn, safetensors_io  # noqa: E402

TOL = 1e-10




def main():
    path = sys.argv[1]
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    case = safetensors_io.load(os.path.join(path, "case.safetensors"))
    grads = safetensors_io.load(os.path.join(path, "grads.safetensors"))
    x = case["x"].clone().requires_grad_(True)
    for t in w.values():
        t.requires_grad_(True)
    y = gdn.mixer(x, w, cfg["prefix"], cfg)
    names = list(w.keys())
    ref_grads = torch.autograd.grad((y * case["dy"]).sum(), [x] + [w[n] for n in names])
    checks = [("y", case["y"], y), ("dx", case["dx"], ref_grads[0])]
    checks += [("grad." + n, grads["grad." + n], g) for n, g in zip(names, ref_grads[1:])]
    worst, fails = 0.0, []
    for name, ours, ref in checks:
        if tuple(ours.shape) != tuple(ref.shape):
            fails.append(f"{name}: shape {tuple(ours.shape)}, reference {tuple(ref.shape)}")
            continue
        e = rel_rms(ours, ref)
        worst = max(worst, e)
        if e > TOL:
            fails.append(f"{name}: rel.rms {e:.3g}")
    for f in fails:
        print("FAIL", f)
    print(f"gdn_check: {len(checks)} tensors, worst rel.rms {worst:.2e}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
