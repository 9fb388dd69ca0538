// CUDA launcher of kv_append_step (raw device pointers; checks in kv_append.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// k_cache, v_cache [B, C, row] and k, v [B, row] of dtype t (f32 or bf16), lengths i32 [B].
void kv_append_step(DType t, void* k_cache, void* v_cache, const void* k, const void* v,
                    int32_t* lengths, int64_t B, int64_t C, int64_t row, cudaStream_t s = 0);

}  // namespace amor::cuda
