"""Mamba2 SSD scan, step by step (design §3; the recurrence of state-spaces/mamba's
selective_state_update applied T times):

    h_t = exp(dt_t * A) * h_{t-1} + dt_t * x_t B_t^T        h_{-1} = initial_state or 0
    y_t = h_t C_t + D * x_t                                   final_state = h_{T-1}

x [B,T,H,P], dt [B,T,H], A [H], B/C [B,T,G,N] (head h reads group h // (H // G)), D [H],
initial_state [B,H,P,N]. With params["step"], the inputs are one decode step (no T axis).
Gradients come from torch autograd through this loop; the chunk size is irrelevant here.
"""
import torch


def scan(x, dt, A, Bm, Cm, D, h):
    heads, groups = x.shape[2], Bm.shape[2]
    Bh = Bm.repeat_interleave(heads // groups, dim=2)  # [B,T,H,N]
    Ch = Cm.repeat_interleave(heads // groups, dim=2)
    ys = []
    for t in range(x.shape[1]):
        decay = torch.exp(dt[:, t] * A)                             # [B,H]
        inject = dt[:, t, :, None, None] * x[:, t, :, :, None] * Bh[:, t, :, None, :]
        h = decay[:, :, None, None] * h + inject                     # [B,H,P,N]
        ys.append(torch.einsum("bhpn,bhn->bhp", h, Ch[:, t]) + D[:, None] * x[:, t])
    return torch.stack(ys, dim=1), h


def forward(x, p):
    step = p.get("step", False)
    args = [x["x"], x["dt"], x["A"], x["B"], x["C"], x["D"]]
    if step:  # add the T = 1 axis
        args = [a.unsqueeze(1) if a.dim() > 1 else a for a in args]
    xx = args[0]
    bsz, _, heads, headdim = xx.shape
    dstate = args[3].shape[-1]
    h0 = x.get("initial_state")
    if h0 is None:
        h0 = torch.zeros(bsz, heads, headdim, dstate, dtype=xx.dtype)
    y, hT = scan(*args, h0)
    if step:
        y = y[:, 0]
    return {"y": y, "final_state": hT}
