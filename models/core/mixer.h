// A sequence mixer (attention, Mamba2, Gated DeltaNet, Oryx's multi-mixer, fused pairs): maps the
// normed input [B,T,d] to [B,T,d]; backward maps the output gradient to the input gradient and
// accumulates its parameters' gradients. drop_saved() frees what forward kept for backward (the
// pre-norm layer calls it under activation recomputation and re-runs forward before backward).
#pragma once
#include "kernels/core/tensor.h"

namespace amor::model {

struct MixerContext {
  bool training = true;
  Tensor query_gate;  // AMOR: u8 [B,T], attention runs only at rows with 1 (undefined = all)
  Tensor modes;       // Oryx: u8 [B,T], 1 = attention, 0 = linear mixer
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  virtual Tensor forward(const Tensor& x, const MixerContext& ctx) = 0;
  virtual Tensor backward(const Tensor& dy) = 0;
  // Releases every tensor saved by the last forward (its own and its submodules'); a backward
  // then needs a new forward first. Backward calls it when done.
  virtual void drop_saved() = 0;
};

}  // namespace amor::model
