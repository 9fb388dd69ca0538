#!/usr/bin/python3
"""A plain-PyTorch AMOR in the AMOR authors' module naming (HaoranZhengRaul/AMOR amor.py), to test
`amor-run convert-weights` without their code or the network.

The module tree (and so the state_dict names) follows amor.py's AMOR class: embed, Mamba2
backbone as transformers builds it (ssd_layers.{i}.norm / .mixer, mlp_norms, mlps) or GDN blocks
(layers.{i}.norm_ssm / .gdn / .norm_mlp / .mlp), norm_f, amor_blocks.{k} (gate buffers, q_proj,
kv_proj.{k,v}_proj, out_proj, raw_alpha), amor_pre_norms ({0} is None), final_norm, and lm_head
tied to embed. The arithmetic is the published semantics; the recurrent mixers call the reference
mixers of tests/torch_ref with the mixer's own parameters (convs [C,1,K] squeezed), everything
else is computed here. Everything runs in double, also the gate's entropy (amor.py takes it in
f32) so that the comparison can be to 1e-10.

Usage (every case folder CASE under ROOT holds model.json, amor-run's ModelConfig; one process
for all cases, as importing torch is most of the time):
  authors_amor.py make ROOT      writes CASE/authors.safetensors (the state dict), CASE/authors.pt,
                                 CASE/batch.safetensors, CASE/theirs.safetensors
  authors_amor.py compare ROOT   CASE/ours.safetensors (amor-run's outputs) against
                                 CASE/theirs.safetensors: 1e-10, gates identical
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import gdn, mamba2, safetensors_io  # noqa: E402
from torch_ref.compare import rel_rms  # noqa: E402
from torch_ref.layers import causal_attention, lm_head, norm_eps, rmsnorm, rope  # noqa: E402

torch.set_default_dtype(torch.float64)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return rmsnorm(x, self.weight, self.eps)


class SwiGLUMLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


def depthwise(c, k, bias):
    return nn.Conv1d(c, c, k, groups=c, bias=bias, padding=k - 1)


def run_ref_mixer(module, fn, x, cfg):
    """The reference mixer over this module's parameters (names local to the mixer)."""
    w = {"m." + n: (p.squeeze(1) if p.dim() == 3 else p) for n, p in module.named_parameters()}
    return fn(x, w, "m", cfg)


class HFMamba2Mixer(nn.Module):
    """transformers' Mamba2Mixer's parameters."""

    def __init__(self, cfg):
        super().__init__()
        m, d = cfg["mamba2"], cfg["d_model"]
        E = m["expand"] * d
        H, GN = E // m["head_dim"], m["n_groups"] * m["d_state"]
        self.in_proj = nn.Linear(d, 2 * E + 2 * GN + H, bias=False)
        self.conv1d = depthwise(E + 2 * GN, m["conv_kernel"], bias=True)
        self.dt_bias = nn.Parameter(torch.ones(H))
        self.A_log = nn.Parameter(torch.ones(H))
        self.D = nn.Parameter(torch.ones(H))
        self.norm = RMSNorm(E, 0)  # MambaRMSNormGated: only its weight is read here
        self.out_proj = nn.Linear(E, d, bias=False)
        self.cfg = cfg

    def forward(self, x):
        return run_ref_mixer(self, mamba2.mixer, x, self.cfg)


class HFMamba2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm = RMSNorm(cfg["d_model"], norm_eps(cfg, "mixer"))
        self.mixer = HFMamba2Mixer(cfg)

    def forward(self, h):
        return h + self.mixer(self.norm(h))


class FLAGatedDeltaNet(nn.Module):
    """fla's GatedDeltaNet layer's parameters."""

    def __init__(self, cfg):
        super().__init__()
        g, d = cfg["gdn"], cfg["d_model"]
        K = g["head_dim"]
        H = math.floor(g["qk_ratio"] * d / K + 0.5)
        V = math.floor(g["v_expand"] * K + 0.5)
        self.q_proj = nn.Linear(d, H * K, bias=False)
        self.k_proj = nn.Linear(d, H * K, bias=False)
        self.v_proj = nn.Linear(d, H * V, bias=False)
        self.a_proj = nn.Linear(d, H, bias=False)
        self.b_proj = nn.Linear(d, H, bias=False)
        self.A_log = nn.Parameter(torch.ones(H))
        self.dt_bias = nn.Parameter(torch.ones(H))
        self.q_conv1d = depthwise(H * K, g["conv_kernel"], bias=False)
        self.k_conv1d = depthwise(H * K, g["conv_kernel"], bias=False)
        self.v_conv1d = depthwise(H * V, g["conv_kernel"], bias=False)
        self.g_proj = nn.Linear(d, H * V, bias=False)
        self.o_norm = RMSNorm(V, 0)  # FusedRMSNormGated: only its weight is read here
        self.o_proj = nn.Linear(H * V, d, bias=False)
        self.cfg = cfg

    def forward(self, x):
        return run_ref_mixer(self, gdn.mixer, x, self.cfg)


class GDNBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.norm_ssm = RMSNorm(d, norm_eps(cfg, "mixer"))
        self.gdn = FLAGatedDeltaNet(cfg)
        self.norm_mlp = RMSNorm(d, norm_eps(cfg, "mlp"))
        self.mlp = SwiGLUMLP(d, cfg["d_ff"])

    def forward(self, h):
        h = h + self.gdn(self.norm_ssm(h))
        return h + self.mlp(self.norm_mlp(h))


class EntropyGate(nn.Module):
    def __init__(self, acfg):
        super().__init__()
        self.register_buffer("running_threshold", torch.tensor(acfg["m_init"]))
        self.register_buffer("running_std", torch.tensor(acfg["s_init"]))
        self.acfg = acfg

    def forward(self, logits):  # eval: the EMA stays frozen
        logp = torch.log_softmax(logits.detach(), -1)
        H = -(logp.exp() * logp).sum(-1) / math.log(logits.shape[-1])
        a = self.acfg
        off = a["kappa"] * self.running_std if a["offset_mode"] == "adaptive" else a["fixed_offset"]
        return (H > self.running_threshold + off).to(torch.uint8), H


class KVProjection(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)


class AMORBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.gate = EntropyGate(cfg["amor"])
        self.q_proj = nn.Linear(d, d, bias=False)
        self.kv_proj = KVProjection(d)
        self.out_proj = nn.Linear(d, d, bias=False)
        self.raw_alpha = nn.Parameter(torch.zeros(d))
        self.cfg = cfg

    def forward(self, hn, logits):
        gate, H = self.gate(logits)
        B, T, d = hn.shape
        hd, base = self.cfg["head_dim"], self.cfg["rope_base"]
        q = rope(self.q_proj(hn).view(B, T, -1, hd), base)
        k = rope(self.kv_proj.k_proj(hn).view(B, T, -1, hd), base)
        v = self.kv_proj.v_proj(hn).view(B, T, -1, hd)
        o = self.out_proj(causal_attention(q, k, v).reshape(B, T, d)) * gate.to(hn.dtype)[..., None]
        alpha = torch.sigmoid(torch.clamp(self.raw_alpha, min=-1.0))
        return hn + alpha * o, gate, H


class AuthorsAMOR(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, L, a = cfg["d_model"], cfg["n_layers"], cfg["amor"]
        self.backbone = a["backbone"]
        self.classic = a["residual_mode"] == "classic"
        self.embed = nn.Embedding(cfg["vocab"], d)
        if self.backbone == "mamba2":
            self.ssd_layers = nn.ModuleList([HFMamba2Block(cfg) for _ in range(L)])
            self.mlp_norms = nn.ModuleList([RMSNorm(d, norm_eps(cfg, "mlp")) for _ in range(L)])
            self.mlps = nn.ModuleList([SwiGLUMLP(d, cfg["d_ff"]) for _ in range(L)])
        else:
            self.layers = nn.ModuleList([GDNBlock(cfg) for _ in range(L)])
        self.norm_f = RMSNorm(d, norm_eps(cfg, "norm_f"))
        self.lm_head = nn.Linear(d, cfg["vocab"], bias=False)
        self.lm_head.weight = self.embed.weight
        self.amor_blocks = nn.ModuleList([AMORBlock(cfg) for _ in range(a["blocks"])])
        self.amor_pre_norms = nn.ModuleList()
        for i in range(a["blocks"]):
            self.amor_pre_norms.append(None if i == 0 else RMSNorm(d, norm_eps(cfg, "amor")))
        self.final_norm = RMSNorm(d, norm_eps(cfg, "amor"))

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        if self.backbone == "mamba2":
            for blk, n, mlp in zip(self.ssd_layers, self.mlp_norms, self.mlps):
                h = blk(h)
                h = h + mlp(n(h))
        else:
            for blk in self.layers:
                h = blk(h)
        if self.classic:
            h = self.norm_f(h)
        out = {}
        for i, (blk, pre) in enumerate(zip(self.amor_blocks, self.amor_pre_norms)):
            hn = pre(h) if pre is not None else (h if self.classic else self.norm_f(h))
            h_out, gate, H = blk(hn, self.lm_head(hn))
            h = h_out if (self.classic and pre is None) else h + (h_out - hn)
            out[f"gate.{i}"], out[f"gate_entropy.{i}"] = gate, H
        loss, ent = lm_head(self.final_norm(h), self.embed.weight, targets)
        out["token_loss"], out["entropy"] = loss, ent
        return out


_CODES = {torch.float64: "F64", torch.float32: "F32", torch.int32: "I32", torch.uint8: "U8"}


def save(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make(out_dir, seed):
    with open(os.path.join(out_dir, "model.json")) as f:
        cfg = json.load(f)
    torch.manual_seed(seed)
    model = AuthorsAMOR(cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():  # every weight random, also out_proj and raw_alpha
            if n.endswith("norm.weight") or n.endswith("norm_ssm.weight") or n.endswith("norm_mlp.weight") \
                    or ".weight" not in n and n.split(".")[-1] in ("D",):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    B, T = 2, 9
    tokens = torch.randint(0, cfg["vocab"], (B, T), dtype=torch.int32)
    targets = torch.randint(0, cfg["vocab"], (B, T), dtype=torch.int32)
    targets[0, 4] = -100
    model.eval()
    # Each block's threshold halfway between two neighbouring entropies of its batch, so that some
    # tokens fire and none sits near tau (a 1e-16 difference must not flip a gate).
    with torch.no_grad():
        for k, blk in enumerate(model.amor_blocks):
            H = model(tokens.long(), targets.long())[f"gate_entropy.{k}"].reshape(-1).sort().values
            j = H.numel() // 2
            s = 0.05 + 0.1 * torch.rand(()).item()
            tau = 0.5 * (H[j - 1] + H[j]).item()
            blk.gate.running_std.fill_(s)
            off = s * cfg["amor"]["kappa"] if cfg["amor"]["offset_mode"] == "adaptive" else cfg["amor"]["fixed_offset"]
            blk.gate.running_threshold.fill_(tau - off)
        out = model(tokens.long(), targets.long())
    os.makedirs(out_dir, exist_ok=True)
    save(os.path.join(out_dir, "authors.safetensors"), model.state_dict(), {"format": "pt"})
    # and as a training script saves it, for scripts/torch_to_safetensors.py
    torch.save({"model": model.state_dict(), "step": 0}, os.path.join(out_dir, "authors.pt"))
    save(os.path.join(out_dir, "batch.safetensors"), {"tokens": tokens, "targets": targets})
    save(os.path.join(out_dir, "theirs.safetensors"), out)


def compare(out_dir):
    theirs = safetensors_io.load(os.path.join(out_dir, "theirs.safetensors"))
    ours = safetensors_io.load(os.path.join(out_dir, "ours.safetensors"))
    fails, worst = [], 0.0
    for name, t in theirs.items():
        if name not in ours:
            fails.append(f"amor-run wrote no '{name}'")
        elif t.dtype == torch.uint8:
            if not torch.equal(t, ours[name].to(torch.uint8)):
                fails.append(f"'{name}' differs in {(t != ours[name]).sum().item()} places")
            elif t.sum() == 0 or t.sum() == t.numel():
                fails.append(f"'{name}' fires everywhere or nowhere: the test checks too little")
        else:
            e = rel_rms(ours[name], t)
            worst = max(worst, e)
            if e > 1e-10:
                fails.append(f"'{name}' rel.rms {e:.3g}")
    print(("FAIL " if fails else "ok   ") + os.path.basename(out_dir) + ": " +
          ("; ".join(fails) if fails else f"worst rel.rms {worst:.2e}"))
    return not fails


def cases(root):
    return [os.path.join(root, c) for c in sorted(os.listdir(root))
            if os.path.isfile(os.path.join(root, c, "model.json"))]


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "make":
        for i, case in enumerate(cases(sys.argv[2])):
            make(case, 100 + i)
    else:
        results = [compare(case) for case in cases(sys.argv[2])]
        sys.exit(0 if results and all(results) else 1)
