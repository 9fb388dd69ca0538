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
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref import amor  # noqa: E402
from torch_ref.cases import compare_grads, compare_outputs, load_model_case, run_cases  # noqa: E402

TOL = 1e-10


def check(path):
    cfg, w, batch, ours = load_model_case(path)
    state = [(float(r[0]), float(r[1])) for r in batch["ema_before"]]
    training = bool(batch["training"][0])
    ref, taus, new_state = amor.run_with_state(w, batch["tokens"].long(), batch["targets"].long(),
                                               cfg, state, training)
    ref["tau"] = torch.tensor(taus, dtype=torch.float64)
    ref["ema_after"] = torch.tensor(new_state, dtype=torch.float64)
    fired = []
    worst, fails = compare_outputs(ref, ours, TOL, fired)
    gworst, gfails = compare_grads((ref["token_loss"] * batch["dloss"]).sum(), w, ours, TOL)
    return max(worst, gworst), fails + gfails, "fired " + ", ".join(fired)


if __name__ == "__main__":
    run_cases(sys.argv[1], check, "amor_check")
