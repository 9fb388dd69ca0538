#!/usr/bin/python3
"""Check amor-run's C++ models against the PyTorch reference models in tests/torch_ref.

Usage: /usr/bin/python3 tests/torch_model_oracle.py CASE_DIR
Each case folder (written by model_oracle_dump) holds a config, weights, a batch and our outputs
and gradients. The reference recomputes per-token losses, entropies (and AMOR gates, Oryx modes)
and, by autograd of sum_t dloss_t * loss_t, every parameter's gradient. In double every number
must agree to relative RMS 1e-10; gates and modes must be identical.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from torch_ref import models  # noqa: E402
from torch_ref.cases import compare_grads, compare_outputs, load_model_case, run_cases  # noqa: E402

TOL = 1e-10


def check(path):
    cfg, w, batch, ours = load_model_case(path)
    ref = models.run(w, batch["tokens"].long(), batch["targets"].long(), cfg, ours)
    worst, fails = compare_outputs(ref, ours, TOL)
    gworst, gfails = compare_grads((ref["token_loss"] * batch["dloss"]).sum(), w, ours, TOL)
    return max(worst, gworst), fails + gfails


if __name__ == "__main__":
    run_cases(sys.argv[1], check, "torch_model_oracle")
