// CUDA launchers of SwiGLU (raw device pointers; checks in swiglu.cpp). g, u, h, dh, dg, du all
// have dtype t (f32 or bf16); arithmetic in f32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

void swiglu_forward(DType t, const void* g, const void* u, void* h, int64_t n, cudaStream_t s = 0);
void swiglu_backward(DType t, const void* g, const void* u, const void* dh, void* dg, void* du,
                     int64_t n, cudaStream_t s = 0);

}  // namespace amor::cuda
