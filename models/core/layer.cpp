#include "models/core/layer.h"

#include "kernels/core/profile.h"
#include "kernels/elementwise/elementwise.h"
#include "models/core/norm_eps.h"
#include "models/mixers/attention_mixer.h"
#include "models/mixers/fused_mixer.h"
#include "models/mixers/gdn_mixer.h"
#include "models/mixers/mamba2_mixer.h"
#include "models/oryx/oryx_mixer.h"

namespace amor::model {

namespace {

// The mixer's name in the step profile (kernels/core/profile.h).
std::string mixer_name(const Mixer& m) {
  if (dynamic_cast<const AttentionMixer*>(&m)) return "attention";
  if (dynamic_cast<const Mamba2Mixer*>(&m)) return "mamba2";
  if (dynamic_cast<const GdnMixer*>(&m)) return "gdn";
  if (dynamic_cast<const OryxMixer*>(&m)) return "oryx";
  if (dynamic_cast<const FusedMixer*>(&m)) return "fused";
  return "mixer";
}

}  // namespace

Layer::Layer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg,
             std::unique_ptr<Mixer> mixer)
    : recompute_(cfg.recompute),
      norm1_(ps, prefix + ".norm1", cfg.d_model, norm_eps_of(cfg).mixer),
      mixer_(std::move(mixer)),
      prof_mixer_fwd_(mixer_name(*mixer_) + " mixer forward (with its norm)"),
      prof_mixer_bwd_(mixer_name(*mixer_) + " mixer backward (with its norm)") {
  if (cfg.d_ff > 0) {
    norm2_ = std::make_unique<RMSNorm>(ps, prefix + ".norm2", cfg.d_model, norm_eps_of(cfg).mlp);
    mlp_ = std::make_unique<SwiGLUMLP>(ps, prefix + ".mlp", cfg.d_model, cfg.d_ff, cfg.init_std);
  }
}

Tensor Layer::run(const Tensor& x, const MixerContext& ctx) {
  Tensor h;
  {
    profile::Section s(prof_mixer_fwd_);
    h = add(x, mixer_->forward(norm1_.forward(x), ctx));
  }
  if (!mlp_) return h;
  profile::Section s("mlp forward");
  return add(h, mlp_->forward(norm2_->forward(h)));
}

Tensor Layer::infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) {
  Tensor h = add(x, mixer_->infer(norm1_.apply(x), ctx, cache));
  if (!mlp_) return h;
  return add(h, mlp_->apply(norm2_->apply(h)));
}

void Layer::drop_saved() {
  norm1_.drop_saved();
  mixer_->drop_saved();
  if (mlp_) {
    norm2_->drop_saved();
    mlp_->drop_saved();
  }
}

Tensor Layer::forward(const Tensor& x, const MixerContext& ctx) {
  Tensor y = run(x, ctx);
  if (recompute_) {
    x_ = x;
    ctx_ = ctx;
    drop_saved();
  }
  return y;
}

Tensor Layer::backward(const Tensor& dy) {
  if (recompute_) {
    AMOR_CHECK(x_.defined(), "Layer::backward: no forward to recompute (backward called twice?)");
    run(x_, ctx_);  // restores what the submodules save; the output itself is not needed
    x_ = Tensor();
    ctx_ = MixerContext();
  }
  Tensor dh = dy.clone();
  if (mlp_) {
    profile::Section s("mlp backward");
    add_(dh, norm2_->backward(mlp_->backward(dy)));
  }
  profile::Section s(prof_mixer_bwd_);
  Tensor dx = dh.clone();
  add_(dx, norm1_.backward(mixer_->backward(dh)));
  return dx;
}

std::unique_ptr<Mixer> make_mixer(char kind, ParamStore& ps, const std::string& prefix,
                                  const ModelConfig& cfg) {
  switch (kind) {
    case 'A': return std::make_unique<AttentionMixer>(ps, prefix, cfg);
    case 'M': return std::make_unique<Mamba2Mixer>(ps, prefix, cfg);
    case 'G': return std::make_unique<GdnMixer>(ps, prefix, cfg);
    case 'O': return std::make_unique<OryxMixer>(ps, prefix, cfg);
    case 'F': return std::make_unique<FusedMixer>(ps, prefix, cfg);
    default:
      throw Error(fmt::format("model: unknown mixer '{}' in a layer pattern (use A, M or G)", kind));
  }
}

}  // namespace amor::model
