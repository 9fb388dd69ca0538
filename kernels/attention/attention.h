// Causal softmax attention with GQA and an optional per-query gate (AMOR's entropy gate, Oryx's
// per-token mixer choice): a gated-off query row costs nothing and outputs exactly zero. Math and
// the conventions for Tq < Tk (queries are the last Tq positions) in attention_ref.h.
//
// Shapes: q [B,Tq,H,D], k and v [B,Tk,Hkv,D] with H % Hkv == 0 and Tq <= Tk; gate u8 [B,Tq]
// (undefined: every row fires). scale defaults to 1/sqrt(D).
#pragma once
#include <optional>

#include "kernels/core/tensor.h"

namespace amor {

struct AttentionOutput {
  Tensor o;    // [B,Tq,H,D]; rows with gate 0 are exactly zero
  // [B,H,Tq], log-sum-exp of the scaled scores, saved for the backward; 0 (not -inf) at gated-off
  // rows. Same dtype as q on the cpu (f32, or f64 so the double backward stays exact).
  Tensor lse;
};
AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate = Tensor(),
                                  std::optional<double> scale = std::nullopt);

// A decode step of every sequence over a KV cache's storage in one call (models/infer/kv_cache.h):
// q [B,Tq,H,D]; k_cache, v_cache [B,C,Hkv,D] (C rows of storage per sequence); lengths i32 [B]
// on q's device, sequence b's keys being rows [0, lengths[b]) of its storage (Tq <= lengths[b] <=
// C), its queries the last Tq of those positions; gate as attention_forward's. The result is
// attention_forward's for each sequence on the views [1, lengths[b], Hkv, D] of its rows: the cpu
// computes exactly that (the reference). On cuda the kernels read the lengths on the device and
// their launch depends on C, not on the lengths (the values are not checked there), so a CUDA
// graph captured once replays the call while the cache fills: bf16 with head dim 64 or 128 and
// Tq <= 4 runs the split-KV decode kernel with its key ranges planned over C (a range a sequence
// has not reached exits at once), anything else the SIMT forward (f32, other head dims). lse as
// attention_forward's (f32 on cuda).
AttentionOutput attention_forward_cache(const Tensor& q, const Tensor& k_cache,
                                        const Tensor& v_cache, const Tensor& lengths,
                                        const Tensor& gate = Tensor(),
                                        std::optional<double> scale = std::nullopt);

// From dout = dL/do and the forward's o and lse (probabilities are recomputed, flash-attention
// style). dq is zero at gated-off rows; gated-off rows contribute nothing to dk, dv.
struct AttentionGrads {
  Tensor dq;  // [B,Tq,H,D]
  Tensor dk;  // [B,Tk,Hkv,D]
  Tensor dv;  // [B,Tk,Hkv,D]
};
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, const Tensor& o, const Tensor& lse,
                                  const Tensor& dout, std::optional<double> scale = std::nullopt);

}  // namespace amor
