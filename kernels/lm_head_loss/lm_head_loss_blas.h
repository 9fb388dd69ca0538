// The CPU backend's LM head + loss: the math of lm_head_loss_ref.h, with the logits of a block of
// tokens against a chunk of the vocabulary formed by one BLAS gemm. Working memory is one
// [token_block x vocab_chunk] buffer (from the caching allocator), whatever N and V are, so the
// [N x V] logits and their gradient never exist.
//
// Outputs as in ref::lm_head_loss_forward / ref::lm_head_loss_backward (same null conventions);
// T is float or double.
#pragma once
#include <cstdint>

namespace amor::cpu {

template <class T>
void lm_head_loss_forward(const T* h, const T* W, const int32_t* targets, T* loss, T* entropy_norm,
                          T* lse, int64_t N, int64_t V, int64_t D, int64_t vocab_chunk,
                          int64_t token_block);

template <class T>
void lm_head_loss_backward(const T* h, const T* W, const int32_t* targets, const T* lse,
                           const T* dloss, T* dh, T* dW, int64_t N, int64_t V, int64_t D,
                           int64_t vocab_chunk, int64_t token_block);

}  // namespace amor::cpu
