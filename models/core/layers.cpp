#include "models/core/layers.h"

#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/swiglu/swiglu.h"

namespace amor::model {

void accumulate(Param* p, const Tensor& g) { add_(p->grad, g); }

Linear::Linear(ParamStore& ps, const std::string& name, int64_t in, int64_t out, InitFn init)
    : w(ps.add(name + ".weight", {out, in}, std::move(init), /*weight_decay=*/true)) {}

Tensor Linear::forward(const Tensor& x) {
  x_ = x;
  return linear_forward(x, w->value);
}

Tensor Linear::apply(const Tensor& x) const { return linear_forward(x, w->value); }

Tensor Linear::backward(const Tensor& dy) {
  LinearGrads g = linear_backward(x_, w->value, dy);
  accumulate(w, g.dw);
  drop_saved();
  return g.dx;
}

RMSNorm::RMSNorm(ParamStore& ps, const std::string& name, int64_t dim, double eps)
    : w(ps.add(name + ".weight", {dim}, init_constant(1.0), /*weight_decay=*/false)), eps_(eps) {}

Tensor RMSNorm::forward(const Tensor& x) {
  RMSNormOut o = rmsnorm_forward(x, w->value, eps_);
  x_ = x;
  rstd_ = o.rstd;
  return o.y;
}

Tensor RMSNorm::apply(const Tensor& x) const { return rmsnorm_forward(x, w->value, eps_).y; }

Tensor RMSNorm::backward(const Tensor& dy) {
  RMSNormGrads g = rmsnorm_backward(x_, w->value, rstd_, dy);
  accumulate(w, g.dw);
  drop_saved();
  return g.dx;
}

SwiGLUMLP::SwiGLUMLP(ParamStore& ps, const std::string& prefix, int64_t d, int64_t d_ff,
                     double init_std)
    : gate_(ps, prefix + ".gate_proj", d, d_ff, init_normal(init_std)),
      up_(ps, prefix + ".up_proj", d, d_ff, init_normal(init_std)),
      down_(ps, prefix + ".down_proj", d_ff, d, init_normal(init_std)) {}

Tensor SwiGLUMLP::forward(const Tensor& x) {
  g_ = gate_.forward(x);
  u_ = up_.forward(x);
  return down_.forward(swiglu_forward(g_, u_));
}

Tensor SwiGLUMLP::apply(const Tensor& x) const {
  return down_.apply(swiglu_forward(gate_.apply(x), up_.apply(x)));
}

Tensor SwiGLUMLP::backward(const Tensor& dy) {
  Tensor dh = down_.backward(dy);
  SwigluGrads s = swiglu_backward(g_, u_, dh);
  g_ = u_ = Tensor();
  Tensor dx = gate_.backward(s.dg);
  add_(dx, up_.backward(s.du));
  return dx;
}

void SwiGLUMLP::drop_saved() {
  g_ = u_ = Tensor();
  gate_.drop_saved();
  up_.drop_saved();
  down_.drop_saved();
}

}  // namespace amor::model
