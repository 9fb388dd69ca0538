// Causal depthwise conv1d over time with optional bias and SiLU: the short conv (K = 4) in front of
// Mamba2's SSD and Gated DeltaNet's q/k/v. Math in conv1d_ref.h.
//
// Shapes: x [B,T,C], weight [C,K] (nn.Conv1d's [C,1,K] without the 1), bias [C], states [B,C,K-1]
// holding the K-1 inputs before the first (state[..., 0] is the oldest). An undefined bias means
// no bias; an undefined initial state means zeros.
//
// Dtypes: on the cpu every tensor has x's dtype (f32 or f64). On cuda x, weight, bias, the states
// and dy share one dtype (f32 or bf16), so do y, dx and dinitial_state; dweight and dbias are f32
// (parameter gradients, reduced in f32: design §2); K is at most 8.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

struct Conv1dOutput {
  Tensor y;            // [B,T,C]
  Tensor final_state;  // [B,C,K-1]: the last K-1 inputs (reaching into initial_state when T < K-1)
};
Conv1dOutput conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                            const Tensor& initial_state = Tensor());

// Gradients given dy and (optionally, undefined = 0) the gradient of the final state. The
// pre-activation is recomputed from x, so the backward needs only the forward's inputs.
struct Conv1dGrads {
  Tensor dx;              // [B,T,C]
  Tensor dweight;         // [C,K]
  Tensor dbias;           // [C]; undefined when there is no bias
  Tensor dinitial_state;  // [B,C,K-1]; undefined when no initial state was given
};
Conv1dGrads conv1d_backward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                            const Tensor& initial_state, const Tensor& dy,
                            const Tensor& dfinal_state = Tensor());

// One decode step: x_t [B,C] -> y_t [B,C]; state [B,C,K-1] is updated in place (shifted by one,
// x_t appended), so T calls equal one conv1d_forward over the T inputs.
Tensor conv1d_step(const Tensor& x_t, Tensor& state, const Tensor& weight, const Tensor& bias,
                   bool silu);

}  // namespace amor
