// CUDA launchers of L2 normalisation (raw device pointers; checks in l2norm.cpp). x, y, dy, dx
// have dtype t (f32 or bf16); rstd is f32 (design §2: f32 statistics).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// x, y [rows, d]; rstd [rows].
void l2norm_forward(DType t, const void* x, void* y, float* rstd, int64_t rows, int64_t d,
                    double eps, cudaStream_t s = 0);
void l2norm_backward(DType t, const void* x, const float* rstd, const void* dy, void* dx,
                     int64_t rows, int64_t d, cudaStream_t s = 0);

}  // namespace amor::cuda
