"""One decode step of the causal depthwise conv1d, written as the window it reads.

x_t [B,C], state [B,C,K-1] (the previous K-1 inputs, oldest first), weight [C,K], bias [C]:
window = [state, x_t]; y = act(bias + sum_j weight[:, j] * window[..., j]); the new state drops
the oldest input and appends x_t.
"""
import torch
import torch.nn.functional as F


def forward(x, p):
    window = torch.cat([x["state"], x["x_t"].unsqueeze(2)], dim=2)  # [B,C,K]
    y = x["bias"] + (window * x["weight"]).sum(dim=2)
    if p["silu"]:
        y = F.silu(y)
    return {"y": y, "new_state": window[..., 1:]}
