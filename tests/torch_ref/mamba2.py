"""The Mamba2 mixer of design §3 in plain PyTorch, as state-spaces/mamba's Mamba2 layer and
Hugging Face's Mamba2Mixer compute it (their torch_forward path), with the SSD written as its
step-by-step recurrence rather than the chunked algorithm:

    [z, xBC, dt] = in_proj(x)                      split sizes d_inner, d_inner + 2GN, H
    xBC = silu(conv1d(xBC))                        depthwise, causal (pad K-1 left, keep T)
    [x, B, C] = xBC                                split sizes d_inner, GN, GN
    dt = softplus(dt + dt_bias);  A = -exp(A_log)
    h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T;   y_t = h_t C_t + D x_t   (per head, h in R^{PxN})
    y = rmsnorm over each of the G groups of (y * silu(z)), times norm.weight
    out = out_proj(y)

w maps full parameter names to tensors; cfg is the dict written by models/core/config_json.cpp.
"""
import torch
import torch.nn.functional as F

from .layers import norm_eps


def gated_group_rmsnorm(y, z, weight, groups, eps):
    """Mamba2's RMSNormGated with norm_before_gate=False: rmsnorm(y * silu(z)) per group."""
    u = y * F.silu(z)
    shape = u.shape
    u = u.view(*shape[:-1], groups, shape[-1] // groups)
    u = u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)
    return u.view(shape) * weight


def ssd_scan(x, dt, A, Bm, Cm, D):
    """x [b,T,H,P], dt [b,T,H], A [H], Bm/Cm [b,T,G,N] (head h reads group h // (H/G)), D [H]."""
    b, T, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    Bh = Bm.repeat_interleave(H // G, dim=2)
    Ch = Cm.repeat_interleave(H // G, dim=2)
    h = x.new_zeros(b, H, P, N)
    ys = []
    for t in range(T):
        dA = torch.exp(dt[:, t] * A)[:, :, None, None]
        dBx = (dt[:, t, :, None] * x[:, t])[:, :, :, None] * Bh[:, t, :, None, :]
        h = dA * h + dBx
        ys.append((h * Ch[:, t, :, None, :]).sum(-1) + D[None, :, None] * x[:, t])
    return torch.stack(ys, dim=1)


def mixer(x, w, prefix, cfg):
    m = cfg["mamba2"]
    b, T, d = x.shape
    d_inner = m["expand"] * d
    P, G, N, K = m["head_dim"], m["n_groups"], m["d_state"], m["conv_kernel"]
    H = d_inner // P
    conv_dim = d_inner + 2 * G * N

    zxbcdt = x @ w[prefix + ".in_proj.weight"].T
    z, xBC, dt = torch.split(zxbcdt, [d_inner, conv_dim, H], dim=-1)

    conv_w = w[prefix + ".conv1d.weight"].view(conv_dim, 1, K)
    xBC = F.conv1d(xBC.transpose(1, 2), conv_w, w[prefix + ".conv1d.bias"], padding=K - 1,
                   groups=conv_dim)[..., :T]
    xBC = F.silu(xBC.transpose(1, 2))
    xs, Bm, Cm = torch.split(xBC, [d_inner, G * N, G * N], dim=-1)

    dt = F.softplus(dt + w[prefix + ".dt_bias"])
    A = -torch.exp(w[prefix + ".A_log"])
    y = ssd_scan(xs.reshape(b, T, H, P), dt, A, Bm.reshape(b, T, G, N), Cm.reshape(b, T, G, N),
                 w[prefix + ".D"])
    y = gated_group_rmsnorm(y.reshape(b, T, d_inner), z, w[prefix + ".norm.weight"], G,
                            norm_eps(cfg, "mamba2"))
    return y @ w[prefix + ".out_proj.weight"].T
