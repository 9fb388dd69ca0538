// Gated RMSNorm with per-group statistics (Mamba2's and Gated DeltaNet's output norm):
//   norm_before_gate = false (Mamba2):  y = rmsnorm_group(x * silu(z)) * w
//   norm_before_gate = true  (GDN):     y = rmsnorm_group(x) * w * silu(z)
// where rmsnorm_group normalises each contiguous group of group_size channels of the last
// dimension by its own rms (group_size == D is one group per row). Math: rmsnorm_gated_ref.h.
// Dtypes as rmsnorm.h: on cuda x, z, w, dy and the outputs y, dx, dz share one dtype (f32 or
// bf16); rstd and dw are f32.
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"
#include "kernels/rmsnorm/rmsnorm.h"

namespace amor {

// x, z [..., D], w [D], D % group_size == 0 -> y [..., D], rstd [rows, D / group_size].
RMSNormOut rmsnorm_gated_forward(const Tensor& x, const Tensor& z, const Tensor& w,
                                 int64_t group_size, double eps, bool norm_before_gate);

struct RMSNormGatedGrads {
  Tensor dx, dz, dw;
};
// rstd is the forward's; an undefined rstd is recomputed from x, z and eps (for callers that
// recompute activations instead of saving them).
RMSNormGatedGrads rmsnorm_gated_backward(const Tensor& x, const Tensor& z, const Tensor& w,
                                         const Tensor& rstd, const Tensor& dy, int64_t group_size,
                                         double eps, bool norm_before_gate);

}  // namespace amor
