// The tied LM head fused with the cross-entropy loss and the normalised entropy (AMOR's gate
// statistic), never holding the [N x V] logits or their gradient: see lm_head_loss_ref.h for the
// math and lm_head_loss_blas.h for how the CPU backend streams over vocab chunks.
//
//   h [N,D] final normed hidden states, W [V,D] the tied embedding (f32 or f64, one dtype),
//   targets i32 [N], -100 (kIgnoreIndex) = no loss and no gradient for that token.
// vocab_chunk bounds the vocabulary slice whose logits exist at once (any V up to 128256 and
// beyond); tokens go in blocks of kLmHeadTokenBlock, so working memory is
// kLmHeadTokenBlock x vocab_chunk elements at most.
//
// On cuda (lm_head_loss_cuda.cu): h and W are f32 or bf16 (one dtype), targets i32 on the device
// (range-checked on a 4 N-byte host copy). Unlike the cpu, where every result has h's dtype:
// loss, entropy, lse and dloss are f32 (design §2: f32 statistics), dh has h's dtype and dW is
// f32 (parameter gradients). The logits are f32 (bf16 products accumulated in f32); token blocks
// of 8192 (cuda::kLmHeadCudaTokenBlock) replace kLmHeadTokenBlock, so the scratch is about
// 8192 x vocab_chunk x (4 + 2 for bf16) bytes.
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

inline constexpr int64_t kLmHeadTokenBlock = 256;

struct LmHeadLossOut {
  Tensor loss;     // [N] lse - z[target]; 0 at ignored tokens
  Tensor entropy;  // [N] H / log V in [0, 1], for every token (ignored ones too); no gradient
  Tensor lse;      // [N] log-sum-exp of the logits, saved for the backward
};
LmHeadLossOut lm_head_loss_forward(const Tensor& h, const Tensor& W, const Tensor& targets,
                                   int64_t vocab_chunk = 8192);

struct LmHeadLossGrads {
  Tensor dh;  // [N,D]; zero rows at ignored tokens
  Tensor dW;  // [V,D]
};
// Gradients of sum_n dloss[n] * loss[n] (the entropy is detached).
LmHeadLossGrads lm_head_loss_backward(const Tensor& h, const Tensor& W, const Tensor& targets,
                                      const Tensor& lse, const Tensor& dloss,
                                      int64_t vocab_chunk = 8192);

// Normalised entropy [N] only, for AMOR's gates (no targets, no gradient).
Tensor lm_head_entropy(const Tensor& h, const Tensor& W, int64_t vocab_chunk = 8192);

// The vocabulary per pass for an inference call over `rows` rows (a decode step: one row per
// sequence). The chunks bound the [rows, chunk] logits' memory at training sizes; at a few rows
// they only cost launches (at V = 50K and chunk 8192 a head is 7 GEMMs and 7 row passes, each
// waited on by the next, for 200 KB of logits per row), so while rows * V <= 4M (16 MB of f32
// logits: 83 rows at V = 50K, 32 at V = 128K) one pass covers the vocabulary; else vocab_chunk.
// Used by the inference paths only (LanguageModel::infer, AmorBlock::infer): their records equal
// the forward's to rounding (one chunk sums in another order), as they already did.
int64_t inference_vocab_chunk(int64_t rows, int64_t V, int64_t vocab_chunk);

}  // namespace amor
