// The copying task: a random token string, a separator, then the same string again; the model is
// scored on reproducing the string after the separator (as in "Repeat After Me", Jelassi et al.
// 2024, and the copying tasks of the state-space-model literature).
//
//   sequence  x_1 .. x_L  SEP  x_1 .. x_L          (2L + 1 tokens, x uniform in [0, V-1))
//   tokens    = sequence[0 .. 2L)                   (2L positions)
//   targets   = sequence[1 .. 2L] at positions L .. 2L-1 (SEP predicts x_1, copy x_i predicts
//               x_{i+1}), -100 on the first L positions
//
// SEP is vocab_size - 1 and never occurs in the string. Example i comes from the stream
// derive_seed(seed, {i}), so it is the same for any num_examples and on every platform.
#pragma once
#include <cstdint>

#include "data/synthetic/token_task.h"

namespace amor::synthetic {

struct CopyingConfig {
  int64_t vocab_size = 256;  // string tokens are [0, vocab_size - 1); SEP = vocab_size - 1
  int64_t copy_length = 32;  // L: tokens per sequence = 2L
  int64_t num_examples = 1000;
  uint64_t seed = 0;
  int64_t first_example = 0;
};

TokenTask copying(const CopyingConfig& config);

}  // namespace amor::synthetic
