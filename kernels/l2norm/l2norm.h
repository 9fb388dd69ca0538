// L2 normalisation over the last dimension, y = x / sqrt(sum(x^2) + eps) (fla's l2norm, used on
// Gated DeltaNet's q and k per head). The forward saves the per-row rstd for the backward.
// Dtypes: on the cpu everything has x's dtype (f32 or f64); on cuda x, dy, y, dx share one dtype
// (f32 or bf16) and rstd is f32 (design §2: f32 statistics).
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

struct L2NormOut {
  Tensor y;     // the shape of x
  Tensor rstd;  // [rows] = 1/sqrt(sum(x^2) + eps), rows = x.numel() / D
};

// x [..., D]
L2NormOut l2norm_forward(const Tensor& x, double eps = 1e-6);
// -> dx [..., D]
Tensor l2norm_backward(const Tensor& x, const Tensor& rstd, const Tensor& dy);

}  // namespace amor
