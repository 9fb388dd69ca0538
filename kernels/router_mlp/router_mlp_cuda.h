// CUDA launcher of router_mlp_forward (raw device pointers; checks in router_mlp.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

inline constexpr int kRouterMlpCudaMaxRows = 16;  // = kRouterMlpMaxRows (router_mlp.h)

// x [n, d] of dtype t (f32 or bf16); w1 [W, d], b1, w2 [W], u [d], b2 [1] f32; partial
// [router_mlp_partial_blocks(W), n] f32 scratch; y [n] f32. n <= kRouterMlpMaxRows.
void router_mlp_forward(DType t, const void* x, const float* w1, const float* b1, const float* w2,
                        const float* u, const float* b2, float* partial, float* y, int64_t n,
                        int64_t d, int64_t W, cudaStream_t s = 0);

// Blocks of the first kernel (the rows of `partial`).
int64_t router_mlp_partial_blocks(int64_t W);

}  // namespace amor::cuda
