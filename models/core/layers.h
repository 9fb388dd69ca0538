// The small building blocks every model kind is made of. Each keeps what its backward needs from
// its last forward (a module instance runs once per forward pass), and its backward accumulates
// parameter gradients into Param::grad and returns the gradient of its input. drop_saved() frees
// what forward kept (activation recomputation); backward frees it too.
#pragma once
#include <string>

#include "models/core/param_store.h"

namespace amor::model {

// y = x W^T, W [out, in], no bias.
class Linear {
 public:
  Linear(ParamStore& ps, const std::string& name, int64_t in, int64_t out, InitFn init);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  // Inference: the same value as forward, nothing saved.
  Tensor apply(const Tensor& x) const;
  void drop_saved() { x_ = Tensor(); }
  Param* w;

 private:
  Tensor x_;
};

// y = w * x / sqrt(mean(x^2) + eps) over the last dimension.
class RMSNorm {
 public:
  RMSNorm(ParamStore& ps, const std::string& name, int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  Tensor apply(const Tensor& x) const;  // inference: forward's value, nothing saved
  void drop_saved() { x_ = rstd_ = Tensor(); }
  Param* w;

 private:
  double eps_;
  Tensor x_, rstd_;
};

// down(silu(gate(x)) * up(x)).
class SwiGLUMLP {
 public:
  SwiGLUMLP(ParamStore& ps, const std::string& prefix, int64_t d, int64_t d_ff, double init_std);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  Tensor apply(const Tensor& x) const;  // inference: forward's value, nothing saved
  void drop_saved();

 private:
  Linear gate_, up_, down_;
  Tensor g_, u_;
};

// Accumulates a freshly computed gradient into a parameter's gradient.
void accumulate(Param* p, const Tensor& g);

}  // namespace amor::model
