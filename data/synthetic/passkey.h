// Passkey retrieval (Mohtashami & Jaggi, "Landmark Attention", 2023; the prompt every long-context
// paper since has reused):
//
//   There is an important info hidden inside a lot of irrelevant text. Find it and memorize them.
//   I will quiz you about the important information there.\n
//   <prefix: the first P characters of "The grass is green. The sky is blue. ..." repeated>\n
//   The pass key is 12345. Remember it. 12345 is the pass key.\n
//   <suffix: the first S characters of the same filler>\n
//   What is the pass key? The pass key is
//
// The answer is the key as a decimal string (uniform in [passkey_min, passkey_max], default
// 1..50000 as the original). The filler length P + S is the largest that keeps prompt tokens +
// tokens_to_generate <= max_seq_length; P = floor((P + S) * depth / 100) for a requested depth
// (the landmark code's int(n_garbage * loc)), uniform in [0, P + S] otherwise (its randint). The
// token form for teacher-forced accuracy is to_token_task (text_task.h). Sample i of a cell comes
// from derive_seed(seed, {max_seq_length, depth, i}).
#pragma once
#include <optional>

#include "data/synthetic/text_task.h"

namespace amor::synthetic {

struct PasskeyConfig {
  int64_t max_seq_length = 4096;
  int64_t tokens_to_generate = 16;
  std::optional<double> depth_percent;  // [0, 100]; unset: uniform
  int64_t num_samples = 1;
  uint64_t seed = 0;
  int64_t passkey_min = 1;
  int64_t passkey_max = 50000;
};

std::vector<TextSample> passkey(const PasskeyConfig& config, const TokenCounter& count);

}  // namespace amor::synthetic
