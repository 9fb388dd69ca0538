// CUDA launchers of the gradient norm pieces (raw device pointers; checks in grad_norm.cpp).
// Gradients are f32 or bf16; sums are accumulated in f64.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// Doubles of scratch that sum_of_squares needs for its per-block partial sums.
int64_t sum_of_squares_scratch_doubles();
// *out (device memory) = sum of g[i]^2 over n elements, accumulated in f64. The sum of one tensor
// is the same on every run (fixed grid, fixed reduction order).
void sum_of_squares(DType t, const void* g, int64_t n, double* scratch, double* out,
                    cudaStream_t s = 0);
// g *= coef in place (coef rounded to f32, the product computed in f32).
void scale_inplace(DType t, void* g, int64_t n, double coef, cudaStream_t s = 0);

}  // namespace amor::cuda
