// L2 normalisation over the last dimension, y = x / sqrt(sum(x^2) + eps) (fla's l2norm, used on
// Gated DeltaNet's q and k per head). The forward saves the per-row rstd for the backward.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

struct L2NormOut {
  Tensor y;     // the shape of x
  Tensor rstd;  // [rows] = 1/sqrt(sum(x^2) + eps), rows = x.numel() / D, in x's dtype
};

// x [..., D]
L2NormOut l2norm_forward(const Tensor& x, double eps = 1e-6);
// -> dx [..., D]
Tensor l2norm_backward(const Tensor& x, const Tensor& rstd, const Tensor& dy);

}  // namespace amor
