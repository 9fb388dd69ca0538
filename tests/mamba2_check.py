#!/usr/bin/python3
"""Check the C++ Mamba2 mixer against the PyTorch reference (tests/torch_ref/mamba2.py).

Usage: /usr/bin/python3 tests/mamba2_check.py CASE_DIR [CASE_DIR...]
Each case folder (written by models/mixers/mamba2_mixer_test.cpp) holds
  config.json          the ModelConfig (models/core/config_json.cpp)
  weights.safetensors  the mixer's parameters under their full names (double)
  io.safetensors       x [B,T,d] (the mixer input) and dy [B,T,d] (the output gradient)
  ours.safetensors     y, dx and grad.<param name>
The reference recomputes y and, by autograd of sum(dy * y), dx and every parameter gradient;
each must agree to relative RMS 1e-10. Exit status 0 when every case passes.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref.compare import rel_rms  # noqa: E402
from torch_ref import mamba2, safetensors_io  # noqa: E402

TOL = 1e-10




def check(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    io = safetensors_io.load(os.path.join(path, "io.safetensors"))
    ours = safetensors_io.load(os.path.join(path, "ours.safetensors"))
    prefix = next(n for n in w if n.endswith(".in_proj.weight"))[: -len(".in_proj.weight")]
    x = io["x"].clone().requires_grad_(True)
    for t in w.values():
        t.requires_grad_(True)
    y = mamba2.mixer(x, w, prefix, cfg)
    names = list(w.keys())
    grads = torch.autograd.grad((y * io["dy"]).sum(), [x] + [w[n] for n in names])
    pairs = [("y", ours["y"], y), ("dx", ours["dx"], grads[0])]
    pairs += [("grad." + n, ours["grad." + n], g) for n, g in zip(names, grads[1:])]
    fails, worst = [], 0.0
    for name, a, b in pairs:
        e = rel_rms(a, b)
        worst = max(worst, e)
        if e > TOL:
            fails.append(f"'{name}' rel.rms {e:.3g}")
    return worst, fails


def main():
    ok = True
    for path in sys.argv[1:]:
        worst, fails = check(path)
        case = os.path.basename(os.path.normpath(path))
        if fails:
            ok = False
            print(f"FAIL {case}: " + "; ".join(fails))
        else:
            print(f"ok   {case} (worst rel.rms {worst:.2e})")
    sys.exit(0 if ok and len(sys.argv) > 1 else 1)


if __name__ == "__main__":
    main()
