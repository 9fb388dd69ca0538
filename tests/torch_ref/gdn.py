"""Gated DeltaNet mixer in plain PyTorch (design §3; Yang et al. 2024, "Gated Delta Networks",
as flash-linear-attention's GatedDeltaNet layer with use_gate=True and use_short_conv=True).

With H heads of key dim K and value dim V (H = round(qk_ratio * d / K), V = v_expand * K):
    q, k, v = silu(short_conv(x W_q)), silu(short_conv(x W_k)), silu(short_conv(x W_v))
    q, k    = per-head L2 normalisation (x / sqrt(sum x^2 + 1e-6))
    beta    = sigmoid(x W_b);   g = -exp(A_log) * softplus(x W_a + dt_bias)
    per head, S [K, V] from zero, one token at a time:
        S = exp(g_t) S;   S = S + beta_t k_t (v_t - S^T k_t)^T;   o_t = S^T q_t / sqrt(K)
    y = (rmsnorm_per_head(o) * w_norm * silu(x W_g)) W_o
The short conv is a causal depthwise nn.Conv1d without bias (the zero-padded past).
"""
import math

import torch
import torch.nn.functional as F


def short_conv(x, weight):
    """Causal depthwise conv over time, x [B,T,C], weight [C,Kc]:
    y_t = sum_j w[:, j] x_{t-Kc+1+j} (zeros before t = 0)."""
    T = x.shape[1]
    Kc = weight.shape[1]
    y = F.conv1d(x.transpose(1, 2), weight.unsqueeze(1), None, groups=x.shape[2], padding=Kc - 1)
    return y[..., :T].transpose(1, 2)


def l2norm(x, eps=1e-6):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def delta_rule(q, k, v, g, beta, scale):
    """The gated delta rule token by token: q,k [B,T,H,K], v [B,T,H,V], g, beta [B,T,H]."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = torch.zeros(B, H, K, V, dtype=q.dtype)
    outs = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        k_t = k[:, t]
        old = (S * k_t[..., None]).sum(-2)                     # S^T k_t  [B,H,V]
        new = beta[:, t][..., None] * (v[:, t] - old)
        S = S + k_t[..., None] * new[..., None, :]             # + k_t new^T
        outs.append((S * (scale * q[:, t])[..., None]).sum(-2))
    return torch.stack(outs, 1)


def mixer(x, w, prefix, cfg):
    B, T, d = x.shape
    c = cfg["gdn"]
    K = c["head_dim"]
    H = math.floor(c["qk_ratio"] * d / K + 0.5)  # rounding half up, as the C++ llround
    V = math.floor(c["v_expand"] * K + 0.5)
    p = prefix + "."

    def branch(name):
        pre = x @ w[p + name + "_proj.weight"].T
        return F.silu(short_conv(pre, w[p + name + "_conv1d.weight"]))

    q = l2norm(branch("q").view(B, T, H, K))
    k = l2norm(branch("k").view(B, T, H, K))
    v = branch("v").view(B, T, H, V)
    beta = torch.sigmoid(x @ w[p + "b_proj.weight"].T)
    g = -w[p + "A_log"].exp() * F.softplus(x @ w[p + "a_proj.weight"].T + w[p + "dt_bias"])
    o = delta_rule(q, k, v, g, beta, 1.0 / math.sqrt(K))

    gate = (x @ w[p + "g_proj.weight"].T).view(B, T, H, V)
    o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + c["norm_eps"])
    o = o * w[p + "o_norm.weight"] * F.silu(gate)
    return o.reshape(B, T, H * V) @ w[p + "o_proj.weight"].T
