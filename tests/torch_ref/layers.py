"""The building blocks of design §3 in plain PyTorch."""
import math

import torch
import torch.nn.functional as F


def rmsnorm(x, w, eps):
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


_EPS_KEYS = {"mixer": ("mixer_norm_eps",), "mlp": ("mlp_norm_eps",), "norm_f": ("norm_f_eps",),
             "amor": ("amor", "norm_eps"), "mamba2": ("mamba2", "norm_eps")}


def norm_eps(cfg, location):
    """The epsilon of a norm location (models/core/norm_eps.h): its own key where > 0, else
    norm_eps (configs written before the per-location keys have none)."""
    v = cfg
    for k in _EPS_KEYS[location]:
        v = v.get(k, {}) if isinstance(v, dict) else 0
    return v if isinstance(v, (int, float)) and v > 0 else cfg["norm_eps"]


def rope(x, base=10000.0, offset=0):
    """Half-split rotation x*cos + rotate_half(x)*sin over [B,T,H,D]."""
    B, T, H, D = x.shape
    inv = base ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2.0 / D)
    pos = torch.arange(offset, offset + T, dtype=torch.float64)
    ang = pos[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)[None, :, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin


def causal_attention(q, k, v, gate=None):
    """q [B,T,H,D], k,v [B,T,Hkv,D]; gate u8 [B,T] zeroes non-firing rows (their Q is unused)."""
    B, T, H, D = q.shape
    hkv = k.shape[2]
    k = k.repeat_interleave(H // hkv, dim=2)
    v = v.repeat_interleave(H // hkv, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(D)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    o = torch.einsum("bhij,bjhd->bihd", torch.softmax(s, -1), v)
    if gate is not None:
        o = o * gate.to(o.dtype)[:, :, None, None]
    return o


def swiglu_mlp(x, w, prefix):
    g = x @ w[prefix + ".gate_proj.weight"].T
    u = x @ w[prefix + ".up_proj.weight"].T
    return (F.silu(g) * u) @ w[prefix + ".down_proj.weight"].T


def attention_mixer(x, w, prefix, cfg, gate=None):
    B, T, d = x.shape
    hd = cfg["head_dim"]
    q = (x @ w[prefix + ".q_proj.weight"].T).view(B, T, -1, hd)
    k = (x @ w[prefix + ".k_proj.weight"].T).view(B, T, -1, hd)
    v = (x @ w[prefix + ".v_proj.weight"].T).view(B, T, -1, hd)
    o = causal_attention(rope(q, cfg["rope_base"]), rope(k, cfg["rope_base"]), v, gate)
    return o.reshape(B, T, -1) @ w[prefix + ".o_proj.weight"].T


def lm_head(h, emb, targets):
    """Per-token loss (0 at ignored targets) and normalised entropy, from the tied head."""
    logits = h @ emb.T
    V = emb.shape[0]
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100,
                           reduction="none").view(targets.shape)
    logp = torch.log_softmax(logits.detach(), -1)
    ent = -(logp.exp() * logp).sum(-1) / math.log(V)
    return loss, ent
