// CUDA launchers of kv_append_step and kv_rope_append_step (raw device pointers; checks in
// kv_append.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// k_cache, v_cache [B, C, row] and k, v [B, row] of dtype t (f32 or bf16), lengths i32 [B].
void kv_append_step(DType t, void* k_cache, void* v_cache, const void* k, const void* v,
                    int32_t* lengths, int64_t B, int64_t C, int64_t row, cudaStream_t s = 0);

// qkv [B, (Hq + 2 Hkv) D] and q_out [B, Hq, D] of dtype t (f32 or bf16), k_cache, v_cache
// [B, C, Hkv, D], lengths i32 [B]; D even.
void kv_rope_append_step(DType t, const void* qkv, void* q_out, void* k_cache, void* v_cache,
                         int32_t* lengths, int64_t B, int64_t C, int64_t Hq, int64_t Hkv, int64_t D,
                         double base, cudaStream_t s = 0);

}  // namespace amor::cuda
