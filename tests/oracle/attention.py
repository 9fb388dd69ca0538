"""Causal softmax attention with GQA and a per-query gate, as explicit masked softmax in torch.

q [B,Tq,H,D], k,v [B,Tk,Hkv,D]; query head h uses kv head h // (H/Hkv) (repeat_interleave).
The Tq queries are the last Tq of Tk positions: query i may see key j iff j <= i + Tk - Tq.
scores = scale * q k^T (scale default 1/sqrt(D)), masked to -inf, softmax in the case dtype,
o = P v. The gate multiplies the output rows, so a gated-off row outputs 0 and passes no
gradient to q, k or v. lse = logsumexp of the masked scaled scores, defined as 0 at gated-off rows.
"""
import math

import torch


def forward(x, p):
    q, k, v = x["q"], x["k"], x["v"]
    B, Tq, H, D = q.shape
    Tk, Hkv = k.shape[1], k.shape[2]
    scale = p.get("scale", 1.0 / math.sqrt(D))
    k = k.repeat_interleave(H // Hkv, dim=2)
    v = v.repeat_interleave(H // Hkv, dim=2)
    qh, kh, vh = (t.permute(0, 2, 1, 3) for t in (q, k, v))  # [B,H,T,D]
    scores = scale * (qh @ kh.transpose(-1, -2))  # [B,H,Tq,Tk]
    i = torch.arange(Tq).unsqueeze(1)
    j = torch.arange(Tk).unsqueeze(0)
    visible = j <= i + (Tk - Tq)
    scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = (probs @ vh).permute(0, 2, 1, 3)  # [B,Tq,H,D]
    lse = torch.logsumexp(scores, dim=-1)  # [B,H,Tq]
    if "gate" in x:
        fires = x["gate"] != 0  # [B,Tq]
        o = o * fires.to(o.dtype)[:, :, None, None]
        lse = torch.where(fires[:, None, :], lse, torch.zeros_like(lse))
    return {"o": o, "lse": lse}
