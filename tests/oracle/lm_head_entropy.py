"""Normalised entropy of the tied LM head's softmax, H / log V, with the full logits."""
import math

import torch.nn.functional as F


def forward(x, p):
    z = x["h"] @ x["W"].T
    logp = F.log_softmax(z, dim=-1)
    return {"entropy": (-(logp.exp() * logp).sum(-1) / math.log(z.shape[-1])).detach()}
