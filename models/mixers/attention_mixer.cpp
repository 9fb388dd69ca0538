#include "models/mixers/attention_mixer.h"

#include "kernels/attention/attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/rope/rope.h"
#include "models/infer/kv_cache.h"

namespace amor::model {

namespace {
int64_t kv_heads_of(const ModelConfig& c) {
  int64_t h = c.d_model / c.head_dim;
  return c.n_kv_heads > 0 ? c.n_kv_heads : h;
}
}  // namespace

AttentionMixer::AttentionMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg,
                               InitFn o_init)
    : heads_(cfg.d_model / cfg.head_dim),
      kv_heads_(kv_heads_of(cfg)),
      head_dim_(cfg.head_dim),
      rope_base_(cfg.rope_base),
      q_(ps, prefix + ".q_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)),
      k_(ps, prefix + ".k_proj", cfg.d_model, kv_heads_of(cfg) * cfg.head_dim, init_normal(cfg.init_std)),
      v_(ps, prefix + ".v_proj", cfg.d_model, kv_heads_of(cfg) * cfg.head_dim, init_normal(cfg.init_std)),
      o_(ps, prefix + ".o_proj", cfg.d_model, cfg.d_model,
         o_init ? std::move(o_init) : init_normal(cfg.init_std)) {
  AMOR_CHECK(cfg.d_model % cfg.head_dim == 0, "model: d_model {} is not a multiple of head_dim {}",
             cfg.d_model, cfg.head_dim);
  AMOR_CHECK(heads_ % kv_heads_ == 0, "model: {} attention heads are not a multiple of n_kv_heads {}",
             heads_, kv_heads_);
}

Tensor AttentionMixer::forward(const Tensor& x, const MixerContext& ctx) {
  int64_t B = x.size(0), T = x.size(1);
  qr_ = rope_forward(q_.forward(x).view({B, T, heads_, head_dim_}), 0, rope_base_);
  kr_ = rope_forward(k_.forward(x).view({B, T, kv_heads_, head_dim_}), 0, rope_base_);
  v4_ = v_.forward(x).view({B, T, kv_heads_, head_dim_});
  gate_ = ctx.query_gate;
  AttentionOutput a = attention_forward(qr_, kr_, v4_, gate_);
  attn_o_ = a.o;
  lse_ = a.lse;
  return o_.forward(a.o.view({B, T, heads_ * head_dim_}));
}

Tensor AttentionMixer::backward(const Tensor& dy) {
  int64_t B = dy.size(0), T = dy.size(1);
  Tensor dao = o_.backward(dy).view({B, T, heads_, head_dim_});
  AttentionGrads g = attention_backward(qr_, kr_, v4_, gate_, attn_o_, lse_, dao);
  Tensor dx = q_.backward(rope_backward(g.dq, 0, rope_base_).view({B, T, heads_ * head_dim_}));
  add_(dx, k_.backward(rope_backward(g.dk, 0, rope_base_).view({B, T, kv_heads_ * head_dim_})));
  add_(dx, v_.backward(g.dv.view({B, T, kv_heads_ * head_dim_})));
  drop_saved();
  return dx;
}

void AttentionMixer::drop_saved() {
  q_.drop_saved();
  k_.drop_saved();
  v_.drop_saved();
  o_.drop_saved();
  qr_ = kr_ = v4_ = gate_ = attn_o_ = lse_ = Tensor();
}

namespace {
struct AttentionCache final : MixerCache {
  KvCache kv;

  void append_rows(MixerCache& other) override {
    kv.append_rows(cache_as<AttentionCache>(other, "AttentionMixer").kv);
  }
  void reserve_tokens(int64_t tokens) override { kv.reserve_tokens(tokens); }
  void kv_caches(std::vector<KvCache*>& out) override { out.push_back(&kv); }
};
}  // namespace

std::unique_ptr<MixerCache> AttentionMixer::new_cache() const {
  return std::make_unique<AttentionCache>();
}

Tensor AttentionMixer::infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) {
  AttentionCache& c = cache_as<AttentionCache>(cache, "AttentionMixer");
  const int64_t B = x.size(0), T = x.size(1);
  // Both rotated at the cache's next positions before the append moves them (on the step path,
  // T = 1 on the GPU, the kernels read them on the device: kv_cache.h).
  Tensor q = c.kv.rotate_next(q_.apply(x).view({B, T, heads_, head_dim_}), rope_base_);
  c.kv.append(c.kv.rotate_next(k_.apply(x).view({B, T, kv_heads_, head_dim_}), rope_base_),
              v_.apply(x).view({B, T, kv_heads_, head_dim_}));
  return o_.apply(c.kv.attend(q, ctx.query_gate).view({B, T, heads_ * head_dim_}));
}

}  // namespace amor::model
