# Gated RMSNorm with statistics per contiguous group of group_size channels of the last dimension,
# as in Mamba2 (mamba_ssm RMSNormGated, norm_before_gate=False) and Gated DeltaNet (fla
# FusedRMSNormGated: norm, then weight, then the silu gate):
#   norm_before_gate = False:  y = rmsnorm_group(x * silu(z)) * w
#   norm_before_gate = True:   y = rmsnorm_group(x) * w * silu(z)
# rstd = 1 / sqrt(mean over the group of u^2 + eps), shape [rows, D / group_size].
import torch.nn.functional as F
import torch


def forward(x, p):
    xs, z, w = x["x"], x["z"], x["w"]
    g, eps, nbg = int(p["group_size"]), p["eps"], bool(p["norm_before_gate"])
    d = xs.shape[-1]
    u = xs if nbg else xs * F.silu(z)
    ug = u.reshape(-1, d // g, g)
    rstd = torch.rsqrt(ug.pow(2).mean(dim=-1, keepdim=True) + eps)
    normed = (ug * rstd).reshape(xs.shape)
    y = normed * w
    if nbg:
        y = y * F.silu(z)
    return {"y": y, "rstd": rstd.reshape(-1, d // g)}
