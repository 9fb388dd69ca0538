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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref import oryx, safetensors_io  # noqa: E402
from torch_ref.cases import compare_grads, run_cases  # noqa: E402
from torch_ref.compare import rel_rms  # noqa: E402

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
    wrt = {"dx": x, **w}  # ours holds dx under "dx", every parameter's under "grad.<name>"
    ours = dict(ours, **{"grad.dx": ours["dx"]})
    worst = rel_rms(ours["y"], y)
    fails = [f"'y' rel.rms {worst:.3g}"] if worst > TOL else []
    gworst, gfails = compare_grads((y * inp["dy"]).sum(), wrt, ours, TOL)
    return max(worst, gworst), fails + gfails


if __name__ == "__main__":
    run_cases(sys.argv[1], check, "oryx_check")
