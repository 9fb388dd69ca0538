"""What every PyTorch check script does with its case folders (tests/*_check.py,
tests/torch_model_oracle.py): load a model case written by the C++ side, compare the reference's
outputs and parameter gradients with ours, and run every case of a folder with one line per case.
One copy, so that the scripts differ only in what they recompute."""
import json
import os
import sys

import torch

from torch_ref import safetensors_io
from torch_ref.compare import rel_rms


def load_model_case(path):
    """config.json, weights.safetensors (each tensor requiring grad), batch.safetensors and
    ours.safetensors of one case folder."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    batch = safetensors_io.load(os.path.join(path, "batch.safetensors"))
    ours = safetensors_io.load(os.path.join(path, "ours.safetensors"))
    for t in w.values():
        t.requires_grad_(True)
    return cfg, w, batch, ours


def compare_outputs(ref, ours, tol, fired=None):
    """Each reference output against ours: u8/bool ones (gates, modes) must be identical, the
    rest within relative RMS tol. Returns (worst rel.rms, failures); appends 'name k/n' of each u8
    output to `fired` when given."""
    fails, worst = [], 0.0
    for name, t in ref.items():
        if name not in ours:
            fails.append(f"we wrote no '{name}'")
            continue
        if t.dtype in (torch.uint8, torch.bool):
            t = t.to(torch.uint8)
            if fired is not None:
                fired.append(f"{name} {int(t.sum())}/{t.numel()}")
            if not torch.equal(t, ours[name].to(torch.uint8)):
                fails.append(f"'{name}' differs in {(t != ours[name].to(torch.uint8)).sum().item()} places")
            continue
        e = rel_rms(ours[name], t)
        worst = max(worst, e)
        if e > tol:
            fails.append(f"'{name}' rel.rms {e:.3g}")
    return worst, fails


def compare_grads(objective, wrt, ours, tol):
    """Autograd of `objective` with respect to each named tensor of `wrt` ({name: tensor}) against
    ours["grad." + name] (an unused tensor's gradient is zeros). Returns (worst, failures)."""
    names = list(wrt.keys())
    grads = torch.autograd.grad(objective, [wrt[n] for n in names], allow_unused=True)
    fails, worst = [], 0.0
    for n, g in zip(names, grads):
        if g is None:
            g = torch.zeros_like(wrt[n])
        e = rel_rms(ours["grad." + n], g)
        worst = max(worst, e)
        if e > tol:
            fails.append(f"grad of '{n}' rel.rms {e:.3g}")
    return worst, fails


def run_cases(root, check, label):
    """check(path) -> (worst, failures[, note]) for every case folder (one with config.json) under
    root; prints 'ok' or 'FAIL' per case and a total, and exits 0 only if at least one case ran and
    every case passed. A case that raises is a failure with its reason, not a crash of the run."""
    passed = failed = 0
    for case in sorted(os.listdir(root)):
        path = os.path.join(root, case)
        if not os.path.isfile(os.path.join(path, "config.json")):
            continue
        try:
            worst, fails, *note = check(path)
        except Exception as e:
            print(f"FAIL {case}: {type(e).__name__}: {e}")
            failed += 1
            continue
        if fails:
            failed += 1
            print(f"FAIL {case}: " + "; ".join(fails[:8]))
        else:
            passed += 1
            extra = f"; {note[0]}" if note and note[0] else ""
            print(f"ok   {case} (worst rel.rms {worst:.2e}{extra})")
    print(f"{label}: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 and passed > 0 else 1)
