"""Gated delta rule, written from its definition (Gated DeltaNet, Yang et al. 2024) as a plain
step-by-step recurrence; torch autograd supplies every gradient.

Per (b, h) with state S [K, V] (initial_state, or zeros):
    S <- exp(g_t) S;  v'_t = beta_t (v_t - S^T k_t);  S <- S + k_t v'_t^T;  o_t = S^T (scale q_t)
Inputs q, k [B,T,H,K], v [B,T,H,V], g, beta [B,T,H]; outputs o [B,T,H,V], final_state [B,H,K,V].
The case's chunk_size says which C++ algorithm produced the case; the oracle ignores it.
"""
import torch


def forward(x, p):
    q, k, v, g, beta = x["q"], x["k"], x["v"], x["g"], x["beta"]
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = x.get("initial_state")
    if S is None:
        S = torch.zeros(B, H, K, V, dtype=q.dtype)
    scale = p["scale"]
    outs = []
    for t in range(T):
        S = S * torch.exp(g[:, t])[:, :, None, None]
        k_t = k[:, t]                                        # [B,H,K]
        predicted = torch.einsum("bhkv,bhk->bhv", S, k_t)    # S^T k_t
        v_new = beta[:, t, :, None] * (v[:, t] - predicted)  # [B,H,V]
        S = S + torch.einsum("bhk,bhv->bhkv", k_t, v_new)
        outs.append(torch.einsum("bhkv,bhk->bhv", S, scale * q[:, t]))
    return {"o": torch.stack(outs, dim=1), "final_state": S}
