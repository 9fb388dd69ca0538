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
#include <vector>

#include "kernels/core/tensor.h"

namespace amor {

// h [N,D], W [V,D] -> i32 [N] on h's device. On cuda h and W are f32 or bf16 (logits in f32).
// A non-empty `excluded` is checked and (on cuda) copied to the device at every call: a call
// that a CUDA graph captures takes an ArgmaxExclusion instead.
Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk = 8192,
                      std::span<const int32_t> excluded = {});

// Excluded ids prepared once for a vocabulary of V ids on one device: checked (each in [0, V), at
// least one id left), sorted without repeats and, on cuda, uploaded. An argmax that takes it
// reads nothing from the host and uploads nothing, so a CUDA graph can capture it with the ids
// at a fixed device address (models/infer/decode_graph.h); the object must then outlive the
// graph. Two exclusions with the same `ids` choose the same argmax.
struct ArgmaxExclusion {
  ArgmaxExclusion() = default;  // nothing excluded
  ArgmaxExclusion(std::span<const int32_t> excluded, int64_t V, Device device);
  bool empty() const { return ids.empty(); }

  std::vector<int32_t> ids;  // sorted, unique
  int64_t V = 0;             // the vocabulary they were checked against
  Device device = Device::CPU;
  Tensor device_ids;         // i32 [ids.size()] on `device` when it is cuda and ids is not empty
};

// lm_head_argmax with a prepared exclusion: h must live on excluded.device and W have
// excluded.V rows (when excluded is not empty). The same ids as lm_head_argmax(..., span).
Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk,
                      const ArgmaxExclusion& excluded);

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
