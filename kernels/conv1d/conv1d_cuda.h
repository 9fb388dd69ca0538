// CUDA launchers of the causal depthwise conv1d (raw device pointers; checks in conv1d.cpp).
// x, weight, bias, states, y, dy, dx, dfinal_state and dinitial_state have dtype t (f32 or bf16);
// dweight and dbias are f32 (parameter gradients, reduced in f32: design §2). bias and the state
// pointers may be null (no bias, zero initial state, no final-state gradient, no dinitial_state).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// Kernel sizes the CUDA kernels handle (the window lives in registers).
inline constexpr int64_t kConv1dMaxK = 8;

// x [B,T,C], w [C,K], bias [C], s0 [B,C,K-1] -> y [B,T,C], s1 [B,C,K-1].
void conv1d_forward(DType t, const void* x, const void* w, const void* bias, const void* s0,
                    bool silu, void* y, void* s1, int64_t B, int64_t T, int64_t C, int64_t K,
                    cudaStream_t s = 0);

// Floats of scratch the backward needs (per-chunk partial sums of dw and dbias).
int64_t conv1d_backward_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t K);
// -> dx [B,T,C], dw [C,K] (f32), dbias [C] (f32, when bias), ds0 [B,C,K-1] (when s0).
void conv1d_backward(DType t, const void* x, const void* w, const void* bias, const void* s0,
                     bool silu, const void* dy, const void* ds1, void* dx, float* dw, float* dbias,
                     void* ds0, float* scratch, int64_t B, int64_t T, int64_t C, int64_t K,
                     cudaStream_t s = 0);

// One decode step: x_t [B,C] -> y_t [B,C]; state [B,C,K-1] shifted in place, x_t appended.
void conv1d_step(DType t, const void* x_t, void* state, const void* w, const void* bias,
                 bool silu, void* y_t, int64_t B, int64_t C, int64_t K, cudaStream_t s = 0);

}  // namespace amor::cuda
