// CUDA launchers of the elementwise ops (raw device pointers; shapes and dtypes are checked by the
// Tensor-level entry points in elementwise.cpp). Storage dtypes: every tensor argument of one call
// has dtype `t` (f32 or bf16), except add_inplace, which also takes an f32 `a` with a bf16 `b`
// (accumulating bf16 gradients into f32), and the per-channel gradients dbias / ds, which are f32
// (design §2: gradients of parameters are reduced in f32). All arithmetic is in f32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

void add(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t s = 0);
void add_inplace(DType ta, void* a, DType tb, const void* b, double alpha, int64_t n,
                 cudaStream_t s = 0);
void mul(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t s = 0);
void scale(DType t, const void* a, double factor, void* y, int64_t n, cudaStream_t s = 0);
void sigmoid_forward(DType t, const void* x, void* y, int64_t n, cudaStream_t s = 0);
void sigmoid_backward(DType t, const void* y, const void* dy, void* dx, int64_t n,
                      cudaStream_t s = 0);
void silu_forward(DType t, const void* x, void* y, int64_t n, cudaStream_t s = 0);
void silu_backward(DType t, const void* x, const void* dy, void* dx, int64_t n,
                   cudaStream_t s = 0);

// x, y [rows, c]; bias / factors [c].
void bias_softplus_forward(DType t, const void* x, const void* bias, void* y, int64_t rows,
                           int64_t c, cudaStream_t s = 0);
// y = h + round(x * factors) (elementwise.h: channel_scale_add), h and y [rows, c].
void channel_scale_add(DType t, const void* h, const void* x, const void* factors, void* y,
                       int64_t rows, int64_t c, cudaStream_t s = 0);
void channel_scale_forward(DType t, const void* x, const void* factors, void* y, int64_t rows,
                           int64_t c, cudaStream_t s = 0);

// The backward ops sum a per-channel gradient over rows in two deterministic passes through an
// f32 scratch buffer of channel_grad_scratch_floats(rows, c) floats (the caller allocates it, so
// the caching allocator serves it).
int64_t channel_grad_scratch_floats(int64_t rows, int64_t c);
void bias_softplus_backward(DType t, const void* x, const void* bias, const void* dy, void* dx,
                            float* dbias, float* scratch, int64_t rows, int64_t c,
                            cudaStream_t s = 0);
void channel_scale_backward(DType t, const void* x, const void* factors, const void* dy, void* dx,
                            float* dfactors, float* scratch, int64_t rows, int64_t c,
                            cudaStream_t s = 0);

}  // namespace amor::cuda
