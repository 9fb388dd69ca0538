// Elementwise ops between the big ones: residual adds, gradient accumulation, gates, activations,
// softplus with a per-channel bias (dt), per-channel scales. See elementwise_ref.h for the math.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

Tensor add(const Tensor& a, const Tensor& b);
// a += alpha * b, one dtype; or a wider accumulator a with a narrower b: f64 += f32 on the cpu,
// f32 += bf16 on cuda (gradients accumulated in the master dtype under mixed precision).
void add_(Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, double s);

Tensor sigmoid_forward(const Tensor& x);
Tensor sigmoid_backward(const Tensor& y, const Tensor& dy);  // from the output y
Tensor silu_forward(const Tensor& x);
Tensor silu_backward(const Tensor& x, const Tensor& dy);

// y = softplus(x + bias) with bias over the last dimension of x.
Tensor bias_softplus_forward(const Tensor& x, const Tensor& bias);
struct BiasSoftplusGrads {
  Tensor dx, dbias;
};
BiasSoftplusGrads bias_softplus_backward(const Tensor& x, const Tensor& bias, const Tensor& dy);

// y = x * s with s over the last dimension of x.
Tensor channel_scale_forward(const Tensor& x, const Tensor& s);
struct ChannelScaleGrads {
  Tensor dx, ds;
};
ChannelScaleGrads channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy);

// y = h + (x * s) with s over the last dimension of x and h of x's shape: a residual add of a
// per-channel scaled branch (AMOR's h + alpha * attention at a decode step) in one launch, the
// same bits as add(h, channel_scale_forward(x, s)) (the product rounded to the dtype first, no
// fused multiply-add). Inference only: no backward.
Tensor channel_scale_add(const Tensor& h, const Tensor& x, const Tensor& s);

}  // namespace amor
