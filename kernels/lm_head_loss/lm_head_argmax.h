// Greedy prediction of the tied LM head: argmax_v (h W^T)[n, v] for each token, streamed over
// vocabulary chunks like the loss so [N x V] logits never exist. Ties go to the lowest id, as
// torch.argmax. Used by evaluation (recall accuracy, greedy decoding); no gradient.
//
// `excluded` (optional) lists ids that are never chosen: the argmax over the other ids, as
// Hugging Face's generate does when it sets the logits of the end ids to -inf for the first
// min_new_tokens steps (MinNewTokensLengthLogitsProcessor). Ids must lie in [0, V) (repeats are
// allowed) and at least one id must remain. On cuda the logits of the excluded ids are set to
// -inf before the row's max is taken (lm_head_loss_cuda.cu), the same choice as the cpu's skip.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/core/tensor.h"

namespace amor {

// h [N,D], W [V,D] -> i32 [N] on h's device. On cuda h and W are f32 or bf16 (logits in f32).
Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk = 8192,
                      std::span<const int32_t> excluded = {});

// What a decode step without targets needs, in one pass over the vocabulary: entropy f32 [N]
// (H / log V, as lm_head_loss_forward's) and the greedy argmax i32 [N] (as lm_head_argmax's), on
// h's device. On cuda nothing is read back to the host (lm_head_loss_forward copies its targets
// for the range check), so a CUDA graph can capture it (models/infer/decode_graph.h).
struct LmHeadDecodeOut {
  Tensor entropy;
  Tensor argmax;
};
LmHeadDecodeOut lm_head_decode(const Tensor& h, const Tensor& W, int64_t vocab_chunk = 8192);

}  // namespace amor
