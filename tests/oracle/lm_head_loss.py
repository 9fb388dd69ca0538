"""Tied LM head + cross-entropy + normalised entropy, with the full logits materialised."""
import math

import torch
import torch.nn.functional as F


def forward(x, p):
    z = x["h"] @ x["W"].T  # [N, V] logits
    V = x["W"].shape[0]
    loss = F.cross_entropy(z, x["targets"], reduction="none", ignore_index=-100)
    logp = F.log_softmax(z, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1) / math.log(V)
    return {"loss": loss, "entropy": entropy.detach(), "lse": torch.logsumexp(z, dim=-1)}
