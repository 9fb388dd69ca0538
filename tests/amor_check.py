#!/usr/bin/python3
"""Check the C++ AMOR model against the PyTorch reference tests/torch_ref/amor.py.

Usage: /usr/bin/python3 tests/amor_check.py ROOT
Each case folder under ROOT (written by models/amor/amor_torch_check_test.cpp) holds
  config.json          the ModelConfig
  weights.safetensors  the parameters (double)
  batch.safetensors    tokens, targets, dloss, ema_before [K,2] (m, s per block), training u8 [1]
  ours.safetensors     token_loss, entropy, gate.i, gate_entropy.i, tau [K], ema_after [K,2],
                       grad.<param name>
The reference replays the forward from ema_before; gates must be identical, every other number
(the thresholds and EMA state too, and each parameter's gradient of sum_t dloss_t * loss_t by
autograd) within relative RMS 1e-10.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref.compare import rel_rms  # noqa: E402
from torch_ref import amor, safetensors_io  # noqa: E402

TOL = 1e-10


def check(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    batch = safetensors_io.load(os.path.join(path, "batch.safetensors"))
    ours = safetensors_io.load(os.path.join(path, "ours.safetensors"))
    for t in w.values():
        t.requires_grad_(True)
    state = [(float(r[0]), float(r[1])) for r in batch["ema_before"]]
    training = bool(batch["training"][0])
    ref, taus, new_state = amor.run_with_state(w, batch["tokens"].long(), batch["targets"].long(),
                                               cfg, state, training)
    ref["tau"] = torch.tensor(taus, dtype=torch.float64)
    ref["ema_after"] = torch.tensor(new_state, dtype=torch.float64)
    fails, worst, fired = [], 0.0, []
    for name, t in ref.items():
        if name not in ours:
            fails.append(f"we wrote no '{name}'")
            continue
        if t.dtype == torch.uint8:
            fired.append(f"{name} {int(t.sum())}/{t.numel()}")
            if not torch.equal(t, ours[name].to(torch.uint8)):
                fails.append(f"'{name}' differs in {(t != ours[name]).sum().item()} places")
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
    return worst, fails, fired


def main():
    root = sys.argv[1]
    passed = failed = 0
    for case in sorted(os.listdir(root)):
        path = os.path.join(root, case)
        if not os.path.isfile(os.path.join(path, "config.json")):
            continue
        try:
            worst, fails, fired = check(path)
        except Exception as e:  # a broken case is a failure, not a crash of the whole check
            print(f"FAIL {case}: {type(e).__name__}: {e}")
            failed += 1
            continue
        if fails:
            failed += 1
            print(f"FAIL {case}: " + "; ".join(fails[:8]))
        else:
            passed += 1
            print(f"ok   {case} (worst rel.rms {worst:.2e}; fired {', '.join(fired)})")
    print(f"amor_check: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
