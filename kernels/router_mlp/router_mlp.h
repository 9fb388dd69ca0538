// The entropy router's MLP in one pass over a few rows: AMOR's fitted router
// (models/amor/entropy_router.h) at a decode step, where its ten tensor ops (a cast, four GEMMs,
// three adds, SiLU) were ten launches per block for one row each.
//
//   y[r] = b2 + x[r] . u + sum_j w2[j] SiLU(b1[j] + x[r] . W1[j]),   SiLU(a) = a / (1 + e^-a)
//
//   x [n, d] (f32 or bf16 on cuda; f32 or f64 on the cpu), W1 [W, d], b1 [W], w2 [W] (or
//   [1, W]), u [d] (or [1, d]), b2 [1]: f32 (f64 with an f64 x on the cpu), on x's device.
//   y [n]: f32 (f64 for an f64 x).
//
// Inference only: the router is fitted on the cpu in f64 (entropy_router.cpp has its backward),
// so this op has no backward. The cpu reference accumulates in double; cuda in f32, each hidden
// unit's dot product by one warp, the sums in a fixed order (the same bits on every run, so a
// CUDA graph replay equals the eager step). Cuda takes at most kRouterMlpMaxRows rows (a decode
// step's batch): the kernel reads W1 once per row, so many rows (a prefill) belong to GEMMs.
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

inline constexpr int64_t kRouterMlpMaxRows = 16;

Tensor router_mlp_forward(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                          const Tensor& u, const Tensor& b2);

}  // namespace amor
