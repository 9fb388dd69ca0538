"""Causal depthwise conv1d (Mamba2 / GDN short conv) with PyTorch's own conv1d.

x [B,T,C], weight [C,K] (nn.Conv1d's [C,1,K]), optional bias [C], optional initial_state
[B,C,K-1] (the K-1 inputs before t=0, oldest first). Without an initial state this is exactly
nn.Conv1d(C, C, K, groups=C, padding=K-1) cut to the first T outputs; with one, the state is
prepended to the sequence instead of the zero padding. final_state = the last K-1 entries of
the padded sequence.
"""
import torch
import torch.nn.functional as F


def forward(x, p):
    inp = x["x"].transpose(1, 2)  # [B,C,T], conv1d's layout
    C, K = x["weight"].shape
    w = x["weight"].unsqueeze(1)  # [C,1,K]
    bias = x.get("bias")
    if "initial_state" in x:
        padded = torch.cat([x["initial_state"], inp], dim=2)
        y = F.conv1d(padded, w, bias, groups=C)
    else:
        padded = F.pad(inp, (K - 1, 0))
        y = F.conv1d(inp, w, bias, groups=C, padding=K - 1)[..., : inp.shape[2]]
    if p["silu"]:
        y = F.silu(y)
    final_state = padded[..., padded.shape[2] - (K - 1):]
    return {"y": y.transpose(1, 2), "final_state": final_state}
