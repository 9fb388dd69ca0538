"""Whole models over a dict of weights w (names as the C++ safetensors files)."""
import torch

from . import amor, fused, gdn, mamba2, oryx
from .layers import attention_mixer, lm_head, norm_eps, rmsnorm, swiglu_mlp


def layer_pattern(cfg):
    n = cfg["n_layers"]
    kind = cfg["kind"]
    if kind == "transformer":
        return "A" * n
    if kind == "mamba2":
        return "M" * n
    if kind == "gdn":
        return "G" * n
    if kind == "serial":
        p = cfg["pattern"]
        return (p * n)[:n]
    if kind == "oryx":
        return "O" * n
    if kind == "fused":
        return "F" * n
    raise ValueError(f"not a stack model: {kind}")


def mixer(letter, x, w, prefix, cfg, modes=None):
    if letter == "O":
        return oryx.mixer(x, w, prefix, cfg, modes)
    if letter == "F":
        return fused.mixer(x, w, prefix, cfg)
    if letter == "A":
        return attention_mixer(x, w, prefix, cfg)
    if letter == "M":
        return mamba2.mixer(x, w, prefix, cfg)
    if letter == "G":
        return gdn.mixer(x, w, prefix, cfg)
    raise ValueError(f"mixer {letter} not in the reference yet")


def layer(letter, x, w, prefix, cfg, modes=None):
    h = x + mixer(letter, rmsnorm(x, w[prefix + ".norm1.weight"], norm_eps(cfg, "mixer")), w,
                  prefix + ".mixer", cfg, modes)
    if cfg["d_ff"] > 0:
        h = h + swiglu_mlp(rmsnorm(h, w[prefix + ".norm2.weight"], norm_eps(cfg, "mlp")), w,
                           prefix + ".mlp")
    return h


def stack_model(w, tokens, targets, cfg, modes=None):
    """modes: Oryx's per-token mixer choice (1 = attention), as the C++ model drew it."""
    emb = w["embed_tokens.weight"]
    h = emb[tokens]
    for i, letter in enumerate(layer_pattern(cfg)):
        h = layer(letter, h, w, f"layers.{i}", cfg, modes)
    h = rmsnorm(h, w["norm_f.weight"], norm_eps(cfg, "norm_f"))
    loss, ent = lm_head(h, emb, targets)
    return {"token_loss": loss, "entropy": ent}


def run(w, tokens, targets, cfg, saved=None):
    """saved: what the C++ model recorded that is random by design (Oryx's modes)."""
    saved = saved or {}
    if cfg["kind"] in ("transformer", "mamba2", "gdn", "serial", "oryx", "fused"):
        return stack_model(w, tokens, targets, cfg, saved.get("modes"))
    if cfg["kind"] == "amor":
        return amor.run(w, tokens, targets, cfg)
    raise ValueError(f"unknown kind {cfg['kind']}")
