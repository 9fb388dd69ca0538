// Softmax attention mixer: q,k,v,o projections (MHA, or GQA with n_kv_heads), RoPE on q and k,
// causal softmax attention with scale 1/sqrt(head_dim), output projection. With a query gate
// (MixerContext::query_gate) only firing rows get attention output; K and V are computed at every
// token. (AMOR's blocks use their own amor/amor_attention.h, which can also skip Q and O.)
#pragma once
#include <memory>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/core/mixer.h"

namespace amor::model {

class AttentionMixer final : public Mixer {
 public:
  // o_init: the output projection's init (AMOR zero-initialises it).
  AttentionMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg,
                 InitFn o_init = nullptr);
  Tensor forward(const Tensor& x, const MixerContext& ctx) override;
  Tensor backward(const Tensor& dy) override;
  void drop_saved() override;
  // Cache: the KV cache (models/infer/kv_cache.h); RoPE at the cache's positions.
  std::unique_ptr<MixerCache> new_cache() const override;
  Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) override;

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double rope_base_;
  Linear q_, k_, v_, o_;
  Tensor qr_, kr_, v4_, gate_, attn_o_, lse_;
};

}  // namespace amor::model
