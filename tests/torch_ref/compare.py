"""The one error measure of every PyTorch check: rms(ours - ref) / rms(ref) (design §2)."""
import math


def rel_rms(ours, ref):
    """Relative RMS error; the absolute RMS of ours when ref is all zero; inf for NaN or a size
    mismatch, so a broken result can never pass."""
    a = ours.detach().double().reshape(-1)
    b = ref.detach().double().reshape(-1)
    if a.numel() != b.numel():
        return math.inf
    den = (b * b).sum().item()
    num = ((a - b) ** 2).sum().item()
    r = math.sqrt(num / den) if den > 0 else math.sqrt(num / max(1, b.numel()))
    return math.inf if math.isnan(r) else r
