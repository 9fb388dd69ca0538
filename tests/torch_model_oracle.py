#!/usr/bin/python3
"""Check amor-run's C++ models against the PyTorch reference models in tests/torch_ref.

Usage: /usr/bin/python3 tests/torch_model_oracle.py CASE_DIR
Each case folder (written by model_oracle_dump) holds a config, weights, a batch and our outputs
and gradients. The reference recomputes per-token losses, entropies (and AMOR gates, Oryx modes)
and, by autograd of sum_t dloss_t * loss_t, every parameter's gradient. In double every number
must agree to relative RMS 1e-10; gates and modes must be identical.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref.compare import rel_rms  # noqa: E402
from torch_ref import models, safetensors_io  # noqa: E402

TOL = 1e-10




def check(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    batch = safetensors_io.load(os.path.join(path, "batch.safetensors"))
    ours = safetensors_io.load(os.path.join(path, "ours.safetensors"))
    for t in w.values():
        t.requires_grad_(True)
    ref = models.run(w, batch["tokens"].long(), batch["targets"].long(), cfg, ours)
    fails, worst = [], 0.0
    for name, t in ref.items():
        if name not in ours:
            fails.append(f"we wrote no '{name}'")
            continue
        if t.dtype in (torch.uint8, torch.bool):
            if not torch.equal(t.to(torch.uint8), ours[name].to(torch.uint8)):
                fails.append(f"'{name}' differs in {(t.to(torch.uint8) != ours[name]).sum().item()} places")
            continue
        e = rel_rms(ours[name], t)
        worst = max(worst, e)
        if e > TOL:
            fails.append(f"'{name}' rel.rms {e:.3g}")
    loss = (ref["token_loss"] * batch["dloss"]).sum()
    names = list(w.keys())
    grads = torch.autograd.grad(loss, [w[n] for n in names], allow_unused=True)
    for n, g in zip(names, grads):
        if g is None:
            g = torch.zeros_like(w[n])
        e = rel_rms(ours["grad." + n], g)
        worst = max(worst, e)
        if e > TOL:
            fails.append(f"grad of '{n}' rel.rms {e:.3g}")
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
        except Exception as e:
            print(f"FAIL {case}: {type(e).__name__}: {e}")
            failed += 1
            continue
        if fails:
            failed += 1
            print(f"FAIL {case}: " + "; ".join(fails[:8]))
        else:
            passed += 1
            print(f"ok   {case} (worst rel.rms {worst:.2e})")
    print(f"torch_model_oracle: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
