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
