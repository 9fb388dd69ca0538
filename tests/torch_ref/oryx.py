"""Oryx's multi-mixer layer (arXiv 2605.28769; design §3 "oryx") in plain PyTorch.

One layer holds softmax attention and one linear mixer (cfg["oryx"]["linear"]: "gdn" = Oryx-TG,
"mamba2" = Oryx-TM) over shared keys, values, output gate and output projection; each token's
output comes from the mixer its mode names (modes [B,T]: 1 attention, 0 linear), while both
memories (attention's keys/values, the linear recurrence) see every token. The recurrences run
step by step here. Weight names are the C++ ones under `prefix`:

  shared     k_proj, v_proj, k_conv1d, v_conv1d, g_proj, o_norm, o_proj
  attention  q_attn_proj
  linear     q_lin_proj, q_lin_conv1d, and gdn: a_proj, b_proj, A_log, dt_bias
                                         mamba2: dt_proj, A_log, dt_bias, D
"""
import math

import torch
import torch.nn.functional as F

from .layers import causal_attention, rope


def short_conv(x, w, silu):
    """Causal depthwise conv: y[t, c] = sum_j w[c, j] * x[t - (K-1) + j, c] (zeros before t=0)."""
    B, T, C = x.shape
    K = w.shape[1]
    ys = []
    for t in range(T):
        acc = torch.zeros(B, C, dtype=x.dtype)
        for j in range(K):
            s = t - (K - 1) + j
            if s >= 0:
                acc = acc + w[:, j] * x[:, s]
        ys.append(acc)
    y = torch.stack(ys, 1)
    return F.silu(y) if silu else y


def l2norm(x, eps=1e-6):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def gated_delta_rule(q, k, v, g, beta, scale):
    """Gated DeltaNet's recurrence per head, S [K,V]: S <- exp(g) S; S <- S + k (beta (v - S^T k))^T;
    o = S^T (scale q)."""
    B, T, H, K = q.shape
    S = torch.zeros(B, H, K, v.shape[-1], dtype=q.dtype)
    outs = []
    for t in range(T):
        S = torch.exp(g[:, t])[..., None, None] * S
        err = v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k[:, t])
        S = S + torch.einsum("bhk,bhv->bhkv", k[:, t], beta[:, t, :, None] * err)
        outs.append(torch.einsum("bhkv,bhk->bhv", S, scale * q[:, t]))
    return torch.stack(outs, 1)


def ssd(x, dt, A, Bm, Cm, D):
    """Mamba2's selective state space per head (one B/C per head here), state h [P,N]:
    h <- exp(dt A) h + dt x B^T;  y = h C + D x."""
    B, T, H, P = x.shape
    h = torch.zeros(B, H, P, Bm.shape[-1], dtype=x.dtype)
    ys = []
    for t in range(T):
        h = torch.exp(dt[:, t] * A)[..., None, None] * h + \
            dt[:, t, :, None, None] * x[:, t, :, :, None] * Bm[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", h, Cm[:, t]) + D[:, None] * x[:, t])
    return torch.stack(ys, 1)


def mixer(x, w, prefix, cfg, modes):
    """x [B,T,d] (the normed layer input), modes u8/bool [B,T] -> y [B,T,d]."""
    B, T, d = x.shape
    hd = cfg["head_dim"]
    H = d // hd
    kind = cfg["oryx"]["linear"]
    silu = kind == "gdn"  # the short convs: SiLU for Oryx-TG, none for Oryx-TM
    p = lambda n: w[prefix + "." + n]  # noqa: E731
    heads = lambda t: t.reshape(B, T, H, hd)  # noqa: E731

    # Shared memories, computed at every token.
    k = heads(short_conv(x @ p("k_proj.weight").T, p("k_conv1d.weight"), silu))
    v = heads(short_conv(x @ p("v_proj.weight").T, p("v_conv1d.weight"), silu))

    # Attention: its own query, RoPE on q and k, causal softmax with scale 1/sqrt(hd).
    qa = heads(x @ p("q_attn_proj.weight").T)
    o_attn = causal_attention(rope(qa, cfg["rope_base"]), rope(k, cfg["rope_base"]), v)

    # The linear mixer: its own query through its own short conv, un-rotated k.
    ql = heads(short_conv(x @ p("q_lin_proj.weight").T, p("q_lin_conv1d.weight"), silu))
    if kind == "gdn":
        beta = torch.sigmoid(x @ p("b_proj.weight").T)
        g = -torch.exp(p("A_log")) * F.softplus(x @ p("a_proj.weight").T + p("dt_bias"))
        o_lin = gated_delta_rule(l2norm(ql), l2norm(k), v, g, beta, 1.0 / math.sqrt(hd))
    elif kind == "mamba2":
        dt = F.softplus(x @ p("dt_proj.weight").T + p("dt_bias"))
        o_lin = ssd(v, dt, -torch.exp(p("A_log")), k, ql, p("D"))
    else:
        raise ValueError(f"oryx.linear {kind}")

    # Each token's output from its own mixer.
    o = torch.where(modes.bool()[:, :, None, None], o_attn, o_lin)

    # Shared output: per-head RMSNorm (one weight for all heads), then the SiLU gate, then W_O.
    z = heads(x @ p("g_proj.weight").T)
    normed = o / torch.sqrt((o * o).mean(-1, keepdim=True) + cfg["norm_eps"]) * p("o_norm.weight")
    return (normed * F.silu(z)).reshape(B, T, d) @ p("o_proj.weight").T
