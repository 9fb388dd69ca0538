// Greedy prediction of the tied LM head: argmax_v (h W^T)[n, v] for each token, streamed over
// vocabulary chunks like the loss so [N x V] logits never exist. Ties go to the lowest id, as
// torch.argmax. Used by evaluation (recall accuracy, greedy decoding); no gradient.
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

// h [N,D], W [V,D] -> i32 [N] on h's device. On cuda h and W are f32 or bf16 (logits in f32).
Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk = 8192);

}  // namespace amor
