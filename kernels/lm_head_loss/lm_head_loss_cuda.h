// CUDA path of the fused LM head + cross-entropy + normalised entropy (and greedy argmax), raw
// device pointers; argument checks live in lm_head_loss.cpp and lm_head_argmax.cpp. The math is
// lm_head_loss_ref.h's; lm_head_loss_cuda.cu says how it is computed.
//
// h [N,D] and W [V,D] have dtype t (f32 or bf16). targets are i32 [N] on the device (-100 =
// ignored). loss, entropy, lse, dloss are f32 [N]; argmax is i32 [N]; dh [N,D] has dtype t; dW
// [V,D] is f32. Tokens go in blocks of kLmHeadCudaTokenBlock and the vocabulary in chunks of
// vocab_chunk columns, so the scratch (from the caller's caching allocator) is
// O(min(N, block) x min(V, vocab_chunk)) bytes, never N x V.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

inline constexpr int64_t kLmHeadCudaTokenBlock = 8192;

// Bytes of scratch lm_head_forward needs.
int64_t lm_head_forward_scratch_bytes(int64_t N, int64_t V, int64_t vocab_chunk);

// Per token: lse, loss = lse - z[target] (0 at ignored tokens), entropy = H / log V, argmax
// (lowest id on ties). Each output pointer may be null (not computed); targets may be null (no
// loss then).
void lm_head_forward(DType t, const void* h, const void* W, const int32_t* targets, float* loss,
                     float* entropy, float* lse, int32_t* argmax, int64_t N, int64_t V, int64_t D,
                     int64_t vocab_chunk, void* scratch, cudaStream_t stream = 0);

// argmax only, never choosing the ids excluded[0 .. n_excluded) (i32 on the device, each in
// [0, V), at least one id left; lm_head_argmax.h): their logits are set to -inf in each chunk
// before the row's max is taken. Scratch: lm_head_forward_scratch_bytes.
void lm_head_argmax_excluding(DType t, const void* h, const void* W, int32_t* argmax, int64_t N,
                              int64_t V, int64_t D, int64_t vocab_chunk, const int32_t* excluded,
                              int64_t n_excluded, void* scratch, cudaStream_t stream = 0);

// Bytes of scratch lm_head_backward needs.
int64_t lm_head_backward_scratch_bytes(DType t, int64_t N, int64_t V, int64_t D,
                                       int64_t vocab_chunk);

// dh and dW (overwritten) of sum_n dloss[n] loss[n], with lse from the forward. host_targets (a
// host copy of targets, or null) lets token blocks whose targets are all ignored be skipped.
void lm_head_backward(DType t, const void* h, const void* W, const int32_t* targets,
                      const int32_t* host_targets, const float* lse, const float* dloss, void* dh,
                      float* dW, int64_t N, int64_t V, int64_t D, int64_t vocab_chunk,
                      void* scratch, cudaStream_t stream = 0);

}  // namespace amor::cuda
