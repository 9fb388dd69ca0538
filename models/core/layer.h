// A layer: pre-norm mixer + residual, then (when d_ff > 0) pre-norm SwiGLU MLP + residual.
//   h = x + mixer(norm1(x));  y = h + mlp(norm2(h))
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

 private:
  RMSNorm norm1_;
  std::unique_ptr<Mixer> mixer_;
  std::unique_ptr<RMSNorm> norm2_;
  std::unique_ptr<SwiGLUMLP> mlp_;
};

// The mixer named by a letter of a layer pattern: 'A' attention, 'M' Mamba2, 'G' Gated DeltaNet.
std::unique_ptr<Mixer> make_mixer(char kind, ParamStore& ps, const std::string& prefix,
                                  const ModelConfig& cfg);

}  // namespace amor::model
