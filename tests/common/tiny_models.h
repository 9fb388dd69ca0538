// Tiny model configs for tests: dimensions every model kind accepts (attention heads of 4, Mamba2
// heads of 4 with d_state 4, GDN heads of K 4 at qk_ratio 0.5, scan chunks of 4 so a sequence of
// 7-13 tokens ends in a partial chunk). Tests set what they vary on top (vocabulary chunking,
// init scale, Oryx schedules).
#pragma once
#include <string>

#include "models/core/config.h"

namespace amor::testing {

inline model::ModelConfig tiny_model(const std::string& kind, int64_t d_model, int64_t n_layers,
                                     int64_t vocab, int64_t d_ff = 12) {
  model::ModelConfig c;
  c.kind = kind;
  c.vocab = vocab;
  c.d_model = d_model;
  c.head_dim = 4;
  c.n_layers = n_layers;
  c.d_ff = d_ff;
  c.mamba2.head_dim = 4;
  c.mamba2.d_state = 4;
  c.mamba2.chunk = 4;
  c.gdn.head_dim = 4;
  c.gdn.qk_ratio = 0.5;
  c.gdn.chunk = 4;
  return c;
}

}  // namespace amor::testing
