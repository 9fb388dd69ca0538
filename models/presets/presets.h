// Scale presets (config key model.preset), design §3: a name "<kind>-<size>" that sets the model
// kind and its size-defining dimensions; every other model.* key (head dims, mamba2.*, gdn.*,
// amor.backbone/blocks, fused_linear, oryx.linear, the serial pattern) comes from the base config,
// so e.g. amor-180m is AMOR-GDN or AMOR-Mamba2 by model.amor.backbone.
//
// Sizes. d_model and depth follow the papers' tables; the vocabulary is the tokenizer the size's
// paper uses, since at these scales the tied embedding is a large share of the count:
//   AMOR (arXiv 2602.13215; Llama-3 tokenizer, V = 128256):
//     180m  d 768,  12 layers;   440m  d 1024, 24 layers;   1.5b  d 2048, 24 layers
//   Mamba2 (Dao & Gu 2024, "Transformers are SSMs": the released mamba2-130m/370m/780m/1.3b,
//   GPT-NeoX tokenizer, ~50k), the scale ladder on which the GDN (Yang et al. 2024) and Oryx
//   (arXiv 2605.28769) papers compare models, up to 1.3B / 1.4B. We use GPT-2's V = 50257, the ~50k BPE tokenizer
//   amor-run ships (data/); the 1.4b shape is Pythia-1.4B's (d 2048, 24 layers):
//     130m  d 768,  12 layers (24 mixer-only);   370m  d 1024, 24 (48 mixer-only)
//     780m  d 1536, 24 (48 mixer-only);          1.4b  d 2048, 24 (Pythia-1.4B's shape)
//
// How each kind reaches its size:
//   amor:       the paper's exact dims, d_ff 1216 / 1984 / 4096 (AMOR-GDN 180m has exactly
//               181,967,832 parameters, 1.5b 1,524,025,472), K blocks from model.amor.blocks.
//   mamba2 at the Mamba2 paper's sizes (130m, 370m, 780m, 1.4b): the paper's mixer-only layers
//               (d_ff 0), as many as bring the count nearest the target: 24, 48, 48 — the paper's
//               own depths — and 50 at 1.4b (its 1.3B shape, 48 layers, is 1.34B here).
//   all others: the size's d_model and depth, layers with SwiGLU MLPs, and d_ff the multiple of
//               64 that brings the count nearest the target (parameter-matched baselines, as the
//               AMOR and Oryx papers compare models; the serial pattern and every mixer setting
//               are included in the fit).
// With the default settings every fitted preset is within 1% of its nominal size and AMOR's within
// 2.5% (presets_test checks all kinds and variants against 3% and prints the table);
// count_parameters (param_count.h) gives the exact count of any config.
//
// Numerics. The amor presets, and the mamba2 and gdn presets at AMOR's sizes (the baselines built
// to match them), also set the AMOR authors' norm epsilons and init (models/README.md, "Norm
// epsilons" and "Init"): model.mixer_norm_eps, mlp_norm_eps, norm_f_eps, amor.norm_eps,
// mamba2.norm_eps, gdn.norm_eps, mamba2.init, gdn.init, by the backbone (model.amor.backbone for
// amor). Every other preset leaves them as the base config has them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/core/config.h"

namespace amor::model {

struct Preset {
  std::string name;        // "<kind>-<size>", e.g. "gdn-180m"
  std::string kind;        // model.kind
  std::string size;        // "180m"
  int64_t target = 0;      // nominal parameter count, e.g. 180'000'000
  int64_t vocab = 0, d_model = 0, n_layers = 0;
  int64_t d_ff = -1;       // fixed d_ff (amor); -1 = fitted to the target
  bool mixer_only = false; // no MLPs; n_layers fitted to the target (mamba2 at Mamba2 sizes)
  bool authors_numerics = false;  // sets the AMOR authors' norm epsilons and init (above)
};

// Every preset, in a stable order (kind, then size).
const std::vector<Preset>& presets();
std::vector<std::string> preset_names();

// Every model.* key apply_preset may set, dotted as in run configs: a run config takes each from
// the preset unless it set the key itself (runner/app/preset_resolve.cpp).
const std::vector<std::string>& preset_keys();

// base with the preset's kind and dimensions applied (model.kind, vocab, d_model, n_layers, d_ff)
// and, for the presets with authors_numerics, the AMOR authors' epsilons and init.
// Throws amor::Error naming model.preset and listing the allowed names for an unknown name, and
// naming model.preset when the base's other settings leave no room to reach the size.
ModelConfig apply_preset(ModelConfig base, const std::string& name);

}  // namespace amor::model
