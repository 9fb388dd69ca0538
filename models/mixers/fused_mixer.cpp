#include "models/mixers/fused_mixer.h"

#include "kernels/elementwise/elementwise.h"
#include "models/core/layer.h"
#include "models/core/norm_eps.h"

namespace amor::model {

char fused_linear_letter(const ModelConfig& cfg) {
  if (cfg.fused_linear == "mamba2") return 'M';
  if (cfg.fused_linear == "gdn") return 'G';
  throw Error(fmt::format("model.fused_linear: '{}' is not one of mamba2, gdn", cfg.fused_linear));
}

FusedMixer::FusedMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : attn_(ps, prefix + ".attn", cfg),
      linear_(make_mixer(fused_linear_letter(cfg), ps, prefix + ".linear", cfg)),
      attn_norm_(ps, prefix + ".attn_norm", cfg.d_model, norm_eps_of(cfg).other),
      linear_norm_(ps, prefix + ".linear_norm", cfg.d_model, norm_eps_of(cfg).other) {}

Tensor FusedMixer::forward(const Tensor& x, const MixerContext& ctx) {
  Tensor y = scale(attn_norm_.forward(attn_.forward(x, ctx)), 0.5);
  add_(y, linear_norm_.forward(linear_->forward(x, ctx)), 0.5);
  return y;
}

Tensor FusedMixer::backward(const Tensor& dy) {
  const Tensor half = scale(dy, 0.5);  // both paths enter the average with weight 1/2
  Tensor dx = attn_.backward(attn_norm_.backward(half));
  add_(dx, linear_->backward(linear_norm_.backward(half)));
  return dx;
}

void FusedMixer::drop_saved() {
  attn_.drop_saved();
  linear_->drop_saved();
  attn_norm_.drop_saved();
  linear_norm_.drop_saved();
}

namespace {
struct FusedCache final : MixerCache {
  std::unique_ptr<MixerCache> attn, linear;

  void append_rows(MixerCache& other) override {
    FusedCache& o = cache_as<FusedCache>(other, "FusedMixer");
    attn->append_rows(*o.attn);
    linear->append_rows(*o.linear);
  }
  void reserve_tokens(int64_t tokens) override {
    attn->reserve_tokens(tokens);
    linear->reserve_tokens(tokens);
  }
  void kv_caches(std::vector<KvCache*>& out) override {
    attn->kv_caches(out);
    linear->kv_caches(out);
  }
};
}  // namespace

std::unique_ptr<MixerCache> FusedMixer::new_cache() const {
  auto c = std::make_unique<FusedCache>();
  c->attn = attn_.new_cache();
  c->linear = linear_->new_cache();
  return c;
}

Tensor FusedMixer::infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) {
  FusedCache& c = cache_as<FusedCache>(cache, "FusedMixer");
  Tensor y = scale(attn_norm_.apply(attn_.infer(x, ctx, *c.attn)), 0.5);
  add_(y, linear_norm_.apply(linear_->infer(x, ctx, *c.linear)), 0.5);
  return y;
}

}  // namespace amor::model
