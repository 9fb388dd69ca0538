// A layer: pre-norm mixer + residual, then (when d_ff > 0) pre-norm SwiGLU MLP + residual.
//   h = x + mixer(norm1(x));  y = h + mlp(norm2(h))
//
// Activation recomputation (model.recompute): after forward the layer keeps only its input x and
// the MixerContext (modes, gates) and drops everything its norms, mixer and MLP saved; backward
// first re-runs the forward from x with the same context, then differentiates as usual. Every op
// is deterministic, so losses and gradients are bitwise those without recomputation, and the
// activations of a stack are held for one layer at a time instead of all layers.
#pragma once
#include <memory>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/core/mixer.h"

namespace amor::model {

class Layer {
 public:
  Layer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg, std::unique_ptr<Mixer> mixer);
  Tensor forward(const Tensor& x, const MixerContext& ctx);
  Tensor backward(const Tensor& dy);
  bool recompute() const { return recompute_; }
  // Inference over the next T tokens with the mixer's cache (mixer.h); nothing saved.
  std::unique_ptr<MixerCache> new_cache() const { return mixer_->new_cache(); }
  Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache);

 private:
  Tensor run(const Tensor& x, const MixerContext& ctx);
  void drop_saved();

  bool recompute_;
  Tensor x_;           // recompute: the input of the last forward
  MixerContext ctx_;   // recompute: its context
  RMSNorm norm1_;
  std::unique_ptr<Mixer> mixer_;
  std::unique_ptr<RMSNorm> norm2_;
  std::unique_ptr<SwiGLUMLP> mlp_;
  std::string prof_mixer_fwd_, prof_mixer_bwd_;  // section names (kernels/core/profile.h)
};

// The mixer named by a letter of a layer pattern: 'A' attention, 'M' Mamba2, 'G' Gated DeltaNet.
std::unique_ptr<Mixer> make_mixer(char kind, ParamStore& ps, const std::string& prefix,
                                  const ModelConfig& cfg);

}  // namespace amor::model
