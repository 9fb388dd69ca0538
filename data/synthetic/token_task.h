// A batch of token-level synthetic examples (MQAR, copying, passkey as tokens) and its scorer.
//
// tokens and targets are i32 [n, T]. targets[i, t] is the token the model should predict after
// reading tokens[i, 0..t], or kIgnore (-100, PyTorch's ignore_index as Zoology uses it) where the
// position is not scored. A model's predictions (argmax of its logits) are i32 [n, T] aligned the
// same way, so accuracy compares predictions[i, t] with targets[i, t] where targets[i, t] != -100.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::synthetic {

inline constexpr int32_t kIgnore = -100;

struct TokenTask {
  Tensor tokens;   // i32 [n, T]
  Tensor targets;  // i32 [n, T], kIgnore where unscored
  Tensor roles{};  // u8 [n, T]: each position's TokenRole (token_roles.h); undefined where the
                   // task has none (MQAR sets it)
};

struct TokenScore {
  double accuracy = 0;  // correct / labelled over the whole batch (Zoology's metric)
  int64_t correct = 0;
  int64_t labelled = 0;
  std::vector<double> per_example;  // each example's own fraction; NaN if it has no labels
};

// Fraction of labelled positions predicted correctly. Errors name the mismatch (dtype, shape, a
// batch with no labelled position at all).
TokenScore score_tokens(const Tensor& predictions, const Tensor& targets);

}  // namespace amor::synthetic
