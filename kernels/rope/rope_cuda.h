// CUDA launcher of RoPE (raw device pointers; checks in rope.cpp). x and y are [B,T,H,Dh] of
// dtype t (f32 or bf16); positions are i64 [B*T] on the device, or null for offset + t;
// rope_rotate_lengths takes i32 lengths [B] on the device instead: token t of sequence b at
// lengths[b] + t (read by the kernel: a CUDA graph replays it while the lengths advance).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// inverse = false: the forward rotation by +a; true: the backward, the rotation by -a.
void rope_rotate(DType t, const void* x, void* y, const int64_t* positions, int64_t offset,
                 int64_t B, int64_t T, int64_t H, int64_t Dh, double base, bool inverse,
                 cudaStream_t s = 0);
void rope_rotate_lengths(DType t, const void* x, void* y, const int32_t* lengths, int64_t B,
                         int64_t T, int64_t H, int64_t Dh, double base, bool inverse,
                         cudaStream_t s = 0);

}  // namespace amor::cuda
