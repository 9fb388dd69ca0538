// RMSNorm over the last dimension: y = w * x / sqrt(mean(x^2) + eps). The forward saves the
// per-row reciprocal rms (rstd) for the backward. The gated, grouped variant is rmsnorm_gated.h.
//
// Dtypes: on the cpu every tensor has x's dtype (f32 or f64). On cuda x, w (and z, dy) share one
// dtype, f32 or bf16, and so do y, dx (and dz); rstd and dw are always f32 (f32 statistics and
// f32 parameter gradients, design §2).
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

struct RMSNormOut {
  Tensor y;     // the shape of x
  Tensor rstd;  // 1/sqrt(mean(x^2) + eps) per row (per row and group for the gated variant)
};

// x [..., D], w [D] -> y [..., D], rstd [rows] (rows = x.numel() / D).
RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& w, double eps);

struct RMSNormGrads {
  Tensor dx, dw;
};
RMSNormGrads rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd,
                              const Tensor& dy);

}  // namespace amor
