"""The fused (Hymba-style) mixer of design §3 in plain PyTorch, and the check of the C++
FusedMixer against it.

    y = (rmsnorm(attn(x), w_attn_norm) + rmsnorm(linear(x), w_linear_norm)) / 2

attention as layers.attention_mixer, the recurrent half (cfg["fused_linear"]: mamba2 | gdn) as
mamba2.mixer / gdn.mixer, parameters under prefix.attn.*, prefix.linear.*, prefix.attn_norm.weight
and prefix.linear_norm.weight.

Run as a script it checks case folders written by models/mixers/fused_mixer_test.cpp:
    /usr/bin/python3 tests/torch_ref/fused.py CASE_DIR [CASE_DIR...]
each holding config.json (to_json of the ModelConfig), prefix.txt (the mixer's prefix),
weights.safetensors (the mixer's parameters, double), io.safetensors (x, dy) and ours.safetensors
(y, dx, grad.<param name>). The reference recomputes y and, by autograd of sum(y * dy), dx and
every parameter gradient; all must agree to relative RMS 1e-10. Exit 0 only if every case passes.
"""
import json
import math
import os
import sys

if __package__ in (None, ""):  # run as a script: import the package this file belongs to
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from torch_ref import gdn, mamba2, safetensors_io  # noqa: E402
    from torch_ref.layers import attention_mixer, rmsnorm  # noqa: E402
else:
    from . import gdn, mamba2, safetensors_io
    from .layers import attention_mixer, rmsnorm

import torch  # noqa: E402

TOL = 1e-10


def linear_mixer(x, w, prefix, cfg):
    kind = cfg["fused_linear"]
    if kind == "mamba2":
        return mamba2.mixer(x, w, prefix, cfg)
    if kind == "gdn":
        return gdn.mixer(x, w, prefix, cfg)
    raise ValueError(f"fused_linear '{kind}' is not one of mamba2, gdn")


def mixer(x, w, prefix, cfg):
    eps = cfg["norm_eps"]
    a = rmsnorm(attention_mixer(x, w, prefix + ".attn", cfg), w[prefix + ".attn_norm.weight"], eps)
    l = rmsnorm(linear_mixer(x, w, prefix + ".linear", cfg), w[prefix + ".linear_norm.weight"], eps)
    return (a + l) / 2


def _rel_rms(a, b):
    a = a.detach().double().reshape(-1)
    b = b.detach().double().reshape(-1)
    den = (b * b).sum().item()
    num = ((a - b) ** 2).sum().item()
    r = math.sqrt(num / den) if den > 0 else math.sqrt(num / max(1, b.numel()))
    return math.inf if math.isnan(r) else r


def check(path):
    """Returns (worst relative RMS error, list of failure descriptions) for one case folder."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(path, "prefix.txt")) as f:
        prefix = f.read().strip()
    w = safetensors_io.load(os.path.join(path, "weights.safetensors"))
    io = safetensors_io.load(os.path.join(path, "io.safetensors"))
    ours = safetensors_io.load(os.path.join(path, "ours.safetensors"))
    x = io["x"].clone().requires_grad_(True)
    for t in w.values():
        t.requires_grad_(True)
    y = mixer(x, w, prefix, cfg)
    names = list(w.keys())
    grads = torch.autograd.grad((y * io["dy"]).sum(), [x] + [w[n] for n in names],
                                allow_unused=True)
    pairs = [("y", ours["y"], y), ("dx", ours["dx"], grads[0])]
    for n, g in zip(names, grads[1:]):
        pairs.append(("grad." + n, ours["grad." + n], torch.zeros_like(w[n]) if g is None else g))
    fails, worst = [], 0.0
    for name, a, b in pairs:
        if tuple(a.shape) != tuple(b.shape):
            fails.append(f"'{name}' shape {tuple(a.shape)}, reference {tuple(b.shape)}")
            continue
        e = _rel_rms(a, b)
        worst = max(worst, e)
        if e > TOL:
            fails.append(f"'{name}' rel.rms {e:.3g}")
    return worst, fails


def main(paths):
    ok = bool(paths)
    for path in paths:
        case = os.path.basename(os.path.normpath(path))
        try:
            worst, fails = check(path)
        except Exception as e:  # a broken case is a failure, with its reason
            ok = False
            print(f"FAIL {case}: {type(e).__name__}: {e}")
            continue
        if fails:
            ok = False
            print(f"FAIL {case}: " + "; ".join(fails))
        else:
            print(f"ok   {case} (worst rel.rms {worst:.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
