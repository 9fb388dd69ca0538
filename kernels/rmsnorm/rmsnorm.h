// RMSNorm over the last dimension: y = w * x / sqrt(mean(x^2) + eps). The forward saves the
// per-row reciprocal rms (rstd) for the backward. The gated, grouped variant is rmsnorm_gated.h.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

struct RMSNormOut {
  Tensor y;     // the shape of x
  Tensor rstd;  // 1/sqrt(mean(x^2) + eps) per row (per row and group for the gated variant)
};

// x [..., D], w [D] -> y [..., D], rstd [rows] (rows = x.numel() / D), both in x's dtype.
RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& w, double eps);

struct RMSNormGrads {
  Tensor dx, dw;
};
RMSNormGrads rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd,
                              const Tensor& dy);

}  // namespace amor
