// CUDA launchers of kernels/cast (raw device pointers; the Tensor-level checks are in cast.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// dst[i] = src[i] converted from dtype `from` to dtype `to`, each f32 or bf16, n elements.
void cast(DType from, const void* src, DType to, void* dst, int64_t n, cudaStream_t stream = 0);

}  // namespace amor::cuda
