// The epsilon of every RMSNorm location (models/README.md, "Norm epsilons"). Each location has a
// key of its own whose 0 means model.norm_eps: configs written before those keys existed (one
// norm_eps for every norm) keep building exactly the same models.
#pragma once
#include "models/core/config.h"

namespace amor::model {

struct NormEps {
  double mixer;   // layers.{i}.norm1
  double mlp;     // layers.{i}.norm2
  double norm_f;  // norm_f (and AMOR block 0's pre-norm, which is norm_f)
  double amor;    // amor.{k}.norm (k >= 1) and final_norm
  double mamba2;  // the Mamba2 mixer's gated norm
  double gdn;     // the GDN mixer's gated output norm (model.gdn.norm_eps, no fallback)
  double other;   // every other norm (fused's attn_norm / linear_norm, Oryx's o_norm)
};

// Throws amor::Error naming the key for a value that is not > 0 (or, for the keys with a
// fallback, 0).
NormEps norm_eps_of(const ModelConfig& c);

}  // namespace amor::model
