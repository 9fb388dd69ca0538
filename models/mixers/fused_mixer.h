// Fused (Hymba-style) mixer, model.kind "fused": attention and a recurrent mixer read the same
// normed input in parallel, each output is RMS-normalised with its own learned per-channel weight,
// and the two are averaged (Hymba, Dong et al. 2024, "parallel hybrid heads"):
//
//   y = ( rmsnorm_a(attn(x)) + rmsnorm_l(linear(x)) ) / 2
//
// The norms put both paths on the same scale before averaging (an SSM's output is typically far
// larger than attention's); their weights are Hymba's learnable per-channel scales beta_1, beta_2.
// The recurrent mixer is cfg.fused_linear: "mamba2" (Mamba2Mixer) or "gdn" (GdnMixer), built with
// the model's mamba2.* / gdn.* settings; attention is the model's AttentionMixer (RoPE, MHA/GQA).
//
// Parameters (prefix + ".", in this order, which is also the init order):
//   attn.{q,k,v,o}_proj.weight     (attention_mixer.h)
//   linear.*                       (mamba2_mixer.h or gdn_mixer.h)
//   attn_norm.weight [d], linear_norm.weight [d]   init 1, no weight decay, eps = model.norm_eps
#pragma once
#include <memory>
#include <string>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/core/mixer.h"
#include "models/mixers/attention_mixer.h"

namespace amor::model {

// The layer letter of the recurrent half for cfg.fused_linear ('M' or 'G'); throws amor::Error
// naming model.fused_linear and its allowed values otherwise.
char fused_linear_letter(const ModelConfig& cfg);

class FusedMixer final : public Mixer {
 public:
  FusedMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);
  Tensor forward(const Tensor& x, const MixerContext& ctx) override;
  Tensor backward(const Tensor& dy) override;
  void drop_saved() override;
  // Cache: attention's KV cache and the recurrent mixer's cache.
  std::unique_ptr<MixerCache> new_cache() const override;
  Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) override;

 private:
  AttentionMixer attn_;
  std::unique_ptr<Mixer> linear_;
  RMSNorm attn_norm_, linear_norm_;
};

}  // namespace amor::model
