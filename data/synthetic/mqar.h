// Multi-query associative recall (MQAR), laid out exactly as Zoology's `multiquery_ar`
// (HazyResearch/zoology, zoology/data/associative_recall.py, `_mqar`):
//
//   keys   are drawn without replacement from [1, V/2)      (token 0 is the filler)
//   values are drawn without replacement from [V/2, V)      (disjoint from the keys)
//   positions 0 .. 2k-1 hold k pairs: key_0 value_0 key_1 value_1 ...
//   the remaining T - 2k positions hold every key once more as a query; key j is queried at
//     position 2k + 2*gap_j, where the gaps are distinct draws from [0, (T-2k)/2) with
//     P(gap = g) proportional to (g+1)^(power_a-1) (a power law: recent repeats are likelier)
//   targets are -100 everywhere except at each query position, where the target is the key's
//     value (the next token the model should produce)
//   every other position is 0, or, with random_non_queries, a uniform token of [0, V)
//   roles (token_roles.h, mqar_roles): key / value over the pairs, query at each query position,
//     filler at every other position after the pairs
//
// Two departures from Zoology, off by default, for a language-modelling form of the task (the
// config's `data.mqar.layout: lm`, experiments/README.md says why AMOR needs it):
//   answers_in_input    the position right after each query holds that key's value (Zoology
//                       leaves it filler; a query's offset is even, so it is always free), role
//                       answer: the sequence reads as text where every key is followed by its value
//   next_token_targets  the target of every position is the next input token (the last position
//                       has none), as a language model is trained, instead of targets only at
//                       the queries; needs answers_in_input (else a query's next token is filler,
//                       not its value). The roles are those of the query-only targets.
//   pair_targets        (default true) false: with next_token_targets, positions 0 .. 2k-1 (the
//                       pairs) get no target. A pair's next token is a random key or value that
//                       nothing can predict; in a short run its loss (ln V/2 per position, 2k of
//                       them) swamps the queries' recall, which is what the task measures.
//
// Zoology asserts input_seq_len even, vocab_size > input_seq_len and 4k <= input_seq_len; so do we,
// with errors naming the parameter. Zoology's test split uses seed + 10; callers do the same.
//
// Determinism: example i is generated from its own stream derive_seed(seed, {i}), so any range of
// examples (first_example ..) can be made on any rank without the others, and is the same on every
// platform (rng.h). The power-law weights use std::pow; a libm that differs from glibc in the last
// bit could only change a gap when a uniform draw lands within that ulp of a boundary (~1e-16).
#pragma once
#include <cstdint>

#include "data/synthetic/token_task.h"

namespace amor::synthetic {

struct MqarConfig {
  int64_t vocab_size = 8192;
  int64_t input_seq_len = 64;
  int64_t num_kv_pairs = 4;
  int64_t num_examples = 1000;
  double power_a = 0.01;
  bool random_non_queries = true;
  bool answers_in_input = false;
  bool next_token_targets = false;
  bool pair_targets = true;
  uint64_t seed = 0;
  int64_t first_example = 0;  // examples [first_example, first_example + num_examples) of the seed
};

TokenTask mqar(const MqarConfig& config);

}  // namespace amor::synthetic
