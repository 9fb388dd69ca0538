// Parameter counts from a ModelConfig alone, without building the model: what `amor-run
// --dry-run` shows per run and what the scale presets are fitted against, for sizes (1.5B in f32
// is ~12 GB of parameters and gradients) where building the ParamStore just to count is too costly.
//
// The formulas mirror the constructors parameter by parameter (attention_mixer, mamba2_mixer,
// gdn_mixer, fused_mixer, oryx_mixer, layer, language_model, amor_model); param_count_test builds
// tiny models of every kind, and 180M-scale ones, and asserts equality with ParamStore::numel().
// Model structure assumed for the kinds the builder wires as stacks: embedding, n_layers layers
// (norm1 + mixer [+ norm2 + SwiGLU MLP when d_ff > 0]), norm_f; amor adds its K blocks and
// final_norm (amor_model.h). Tied embedding/LM head: the vocabulary matrix counts once.
#pragma once
#include <cstdint>

#include "models/core/config.h"

namespace amor::model {

// Total trainable parameters of the model cfg describes. Throws amor::Error naming the key for a
// config the model constructors would reject (unknown kind, bad pattern, heads that do not divide).
int64_t count_parameters(const ModelConfig& cfg);

// The parameters of one mixer of the given layer letter: 'A' attention, 'M' Mamba2, 'G' GDN,
// 'F' fused (cfg.fused_linear), 'O' Oryx (cfg.oryx.linear).
int64_t count_mixer_parameters(char letter, const ModelConfig& cfg);

}  // namespace amor::model
