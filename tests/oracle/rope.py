# Rotary position embedding as in HF Llama (half-split): y = x*cos + rotate_half(x)*sin,
# rotate_half(x) = cat(-x2, x1), inv_freq_i = 1 / base^(2i/Dh), on x [B,T,H,Dh].
# Positions: position_offset + t, or an explicit positions tensor [T] or [B,T].
# cos/sin are taken in float64 (as our op promises) and the product is formed in x's dtype.
import torch


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(x, p):
    xs = x["x"]
    B, T, H, Dh = xs.shape
    if "positions" in x:
        pos = x["positions"].to(torch.float64)
    else:
        pos = torch.arange(T, dtype=torch.float64) + p["position_offset"]
    pos = pos.expand(B, T)
    inv_freq = 1.0 / (p["base"] ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh))
    freqs = pos[..., None] * inv_freq          # [B, T, Dh/2]
    emb = torch.cat((freqs, freqs), dim=-1)    # [B, T, Dh]
    cos = emb.cos()[:, :, None, :].to(xs.dtype)
    sin = emb.sin()[:, :, None, :].to(xs.dtype)
    return {"y": xs * cos + rotate_half(xs) * sin}
