"""AMOR (arXiv 2602.13215) in plain PyTorch, after the authors' amor.py.

    embedding -> [backbone layer] x n_layers -> norm_f -> [AMOR block] x K -> final_norm -> head

Each block measures the normalised entropy of the tied LM head on its normed input hn, updates
its EMA threshold in training (first, as the authors' EntropyGate does), gates with it, and runs
dense causal attention whose output is masked by the gate (the authors' 'full_with_mask'):
    out = hn + alpha * gate * O(attn(RoPE(Q hn), RoPE(K hn), V hn)),
    alpha = sigmoid(clamp(raw_alpha, min=-1)).
residual_mode 'classic': h = norm_f(h); block 0 takes hn = h and h = out; blocks i>0 take
hn = norm_i(h) and h = h + (out - hn). 'h': block 0's pre-norm is norm_f; every block adds
out - hn to the un-normed h.

The EMA state (m, s) of each block is a pair of Python floats (double), given and returned.
"""
import math

import torch

from .layers import attention_mixer, lm_head, norm_eps, rmsnorm

_LETTER = {"gdn": "G", "mamba2": "M", "transformer": "A"}


def gate_entropy(hn, emb):
    """H_t = -sum p log p / log V of softmax(hn emb^T), detached."""
    logp = torch.log_softmax(hn.detach() @ emb.detach().T, -1)
    return -(logp.exp() * logp).sum(-1) / math.log(emb.shape[0])


def entropy_gate(H, state, acfg, training):
    """The authors' EntropyGate: EMA update first (training only), then gate = H > tau."""
    m, s = state
    adaptive = acfg["offset_mode"] == "adaptive"
    mom = acfg["momentum"]
    if training:
        flat = H.reshape(-1)
        m = mom * m + (1 - mom) * flat.median().item()  # torch.median: lower middle value
        if adaptive and flat.numel() > 1:
            s = mom * s + (1 - mom) * flat.std().item()  # unbiased
    tau = m + acfg["kappa"] * s if adaptive else m + acfg["fixed_offset"]
    return (H > tau).to(torch.uint8), tau, (m, s)


def amor_block(hn, emb, w, prefix, cfg, state, training):
    H = gate_entropy(hn, emb)
    gate, tau, state = entropy_gate(H, state, cfg["amor"], training)
    attn = attention_mixer(hn, w, prefix + ".attn", cfg) * gate.to(hn.dtype)[..., None]
    alpha = torch.sigmoid(torch.clamp(w[prefix + ".alpha"], min=-1.0))
    return hn + alpha * attn, H, gate, tau, state


def run_with_state(w, tokens, targets, cfg, ema_state=None, training=True):
    """Returns (outputs, taus, new_state); outputs as run()."""
    from . import models  # the backbone layers (models imports this module for kind 'amor')

    acfg = cfg["amor"]
    K = acfg["blocks"]
    if ema_state is None:
        ema_state = [(acfg["m_init"], acfg["s_init"])] * K
    eps_f, eps_amor = norm_eps(cfg, "norm_f"), norm_eps(cfg, "amor")
    emb = w["embed_tokens.weight"]
    h = emb[tokens]
    letter = _LETTER[acfg["backbone"]]
    for i in range(cfg["n_layers"]):
        h = models.layer(letter, h, w, f"layers.{i}", cfg)
    classic = acfg["residual_mode"] == "classic"
    if classic:
        h = rmsnorm(h, w["norm_f.weight"], eps_f)
    out, taus, new_state = {}, [], []
    for i in range(K):
        if i > 0:
            hn = rmsnorm(h, w[f"amor.{i}.norm.weight"], eps_amor)
        elif classic:
            hn = h
        else:
            hn = rmsnorm(h, w["norm_f.weight"], eps_f)
        h_out, H, gate, tau, st = amor_block(hn, emb, w, f"amor.{i}", cfg, ema_state[i], training)
        if classic and i == 0:
            h = h_out
        else:
            h = h + (h_out - hn)
        out[f"gate.{i}"] = gate
        out[f"gate_entropy.{i}"] = H
        taus.append(tau)
        new_state.append(st)
    h = rmsnorm(h, w["final_norm.weight"], eps_amor)
    loss, ent = lm_head(h, emb, targets)
    out["token_loss"] = loss
    out["entropy"] = ent
    return out, taus, new_state


def run(w, tokens, targets, cfg, ema_state=None, training=True):
    """token_loss, entropy, gate.i, gate_entropy.i of one forward from ema_state (None: init)."""
    return run_with_state(w, tokens, targets, cfg, ema_state, training)[0]
