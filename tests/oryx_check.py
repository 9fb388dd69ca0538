#!/usr/bin/python3
"""Check the C++ OryxMixer against the PyTorch reference tests/torch_ref/oryx.py.

Usage: /usr/bin/python3 tests/oryx_check.py DIR
Each case folder under DIR (written by models/oryx/oryx_torch_test.cpp) holds
  config.json          the ModelConfig (to_json)
  prefix.txt           the mixer's parameter prefix, e.g. "layers.0.mixer"
  weights.safetensors  the mixer's parameters, named "<prefix>.<name>" (double)
  inputs.safetensors   x [B,T,d], modes u8 [B,T], dy [B,T,d]
  ours.safetensors     y, dx and grad.<parameter name>
The reference recomputes y and, by autograd of sum(y * dy), dx and every parameter's gradient;
in double all must agree to relative RMS 1e-10. Exit 0 only if every case passes.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref.compare import rel_rms  # noqa: E402
from torch_ref import oryx, safetensors_io  # noqa: E402

TOL = 1e-10




def check(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(path, "prefix.txt")) as f:
        prefix = f.read().strip()
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    inp = safetensors_io.load(os.path.join(path, "inputs.safetensors"))
    ours = safetensors_io.load(os.path.join(path, "ours.safetensors"))
    x = inp["x"].clone().requires_grad_(True)
    for t in w.values():
        t.requires_grad_(True)
    y = oryx.mixer(x, w, prefix, cfg, inp["modes"])
    names = list(w.keys())
    grads = torch.autograd.grad((y * inp["dy"]).sum(), [x] + [w[n] for n in names], allow_unused=True)
    results = [("y", ours["y"], y), ("dx", ours["dx"], grads[0])]
    for n, g in zip(names, grads[1:]):
        results.append(("grad." + n, ours["grad." + n], torch.zeros_like(w[n]) if g is None else g))
    fails, worst = [], 0.0
    for name, a, b in results:
        e = rel_rms(a, b)
        worst = max(worst, e)
        if e > TOL:
            fails.append(f"'{name}' rel.rms {e:.3g}")
    return worst, fails


def main():
    root = sys.argv[1]
    passed = failed = 0
    for case in sorted(os.listdir(root)):
        path = os.path.join(root, case)
        if not os.path.isfile(os.path.join(path, "config.json")):
            continue
        try:
            worst, fails = check(path)
        except Exception as e:  # a broken case is a failure, with its reason
            print(f"FAIL {case}: {type(e).__name__}: {e}")
            failed += 1
            continue
        if fails:
            failed += 1
            print(f"FAIL {case}: " + "; ".join(fails[:8]))
        else:
            passed += 1
            print(f"ok   {case} (worst rel.rms {worst:.2e})")
    print(f"oryx_check: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
