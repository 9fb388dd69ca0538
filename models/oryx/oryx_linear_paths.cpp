#include "models/oryx/oryx_linear_paths.h"

#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "kernels/gated_delta/gated_delta.h"
#include "kernels/l2norm/l2norm.h"
#include "kernels/ssd/ssd.h"
#include "models/core/scan_dtype.h"
#include "models/infer/recurrent_state.h"

namespace amor::model {

namespace {

// A_log = log(U[lo, hi]) (mamba_ssm U[1,16], fla U[0,16]). A draw <= 0 would make A_log -inf or
// NaN, so it is drawn again.
InitFn init_log_uniform(double lo, double hi) {
  return [lo, hi](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) {
      double a = d(rng);
      while (a <= 0.0) a = d(rng);
      t.set_item(i, std::log(a));
    }
  };
}

// dt_bias = softplus^-1(dt) with dt = exp(U[log dt_min, log dt_max]) floored at dt_floor, so that
// softplus(dt_bias) starts at a useful step size (with dt_bias = 0 the state forgets at once).
InitFn init_dt_bias(double dt_min, double dt_max, double dt_floor) {
  return [=](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(std::log(dt_min), std::log(dt_max));
    for (int64_t i = 0; i < t.numel(); ++i) {
      double dt = std::max(std::exp(d(rng)), dt_floor);
      t.set_item(i, dt + std::log(-std::expm1(-dt)));
    }
  };
}

// -exp(A_log): the per-head decay rate A (< 0). Parameters are tiny [H] vectors: computed on the
// host and moved back to the parameter's device.
Tensor neg_exp(const Tensor& a_log_any) {
  Tensor a_log = a_log_any.to(Device::CPU);
  Tensor a = Tensor::empty(a_log.shape(), a_log.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) a.set_item(i, -std::exp(a_log.item(i)));
  return a.to(a_log_any.device());
}

int64_t heads_of(const ModelConfig& cfg) {
  AMOR_CHECK(cfg.head_dim > 0 && cfg.d_model % cfg.head_dim == 0,
             "model.head_dim: d_model {} is not a multiple of head_dim {}", cfg.d_model,
             cfg.head_dim);
  return cfg.d_model / cfg.head_dim;
}

}  // namespace

std::unique_ptr<OryxLinearPath> make_oryx_linear_path(ParamStore& ps, const std::string& prefix,
                                                      const ModelConfig& cfg) {
  if (cfg.oryx.linear == "gdn") return std::make_unique<OryxGdnPath>(ps, prefix, cfg);
  if (cfg.oryx.linear == "mamba2") return std::make_unique<OryxMamba2Path>(ps, prefix, cfg);
  throw Error(fmt::format("model.oryx.linear is \"{}\"; use gdn (Oryx-TG) or mamba2 (Oryx-TM)",
                          cfg.oryx.linear));
}

// ---- Gated DeltaNet ----

OryxGdnPath::OryxGdnPath(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : heads_(heads_of(cfg)),
      chunk_(cfg.gdn.chunk),
      scale_(gated_delta_default_scale(cfg.head_dim)),
      a_(ps, prefix + ".a_proj", cfg.d_model, heads_of(cfg), init_normal(cfg.init_std)),
      b_(ps, prefix + ".b_proj", cfg.d_model, heads_of(cfg), init_normal(cfg.init_std)),
      A_log_(ps.add(prefix + ".A_log", {heads_}, init_log_uniform(cfg.gdn.a_min, cfg.gdn.a_max),
                    false)),
      dt_bias_(ps.add(prefix + ".dt_bias", {heads_},
                      init_dt_bias(cfg.gdn.dt_min, cfg.gdn.dt_max, cfg.gdn.dt_floor), false)) {
  AMOR_CHECK(chunk_ >= 0, "model.gdn.chunk is {}; it must be >= 0 (0 = step-by-step)", chunk_);
  AMOR_CHECK(cfg.gdn.a_max > 0 && cfg.gdn.a_min <= cfg.gdn.a_max,
             "model.gdn.a_min/a_max are {}/{}; A_log = log(U[a_min, a_max]) needs a_max > 0",
             cfg.gdn.a_min, cfg.gdn.a_max);
}

Tensor OryxGdnPath::forward(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                            bool training) {
  q_ = q;
  k_ = k;
  v_ = v;
  L2NormOut qn = l2norm_forward(q), kn = l2norm_forward(k);
  qn_ = qn.y;
  kn_ = kn.y;
  q_rstd_ = qn.rstd;
  k_rstd_ = kn.rstd;
  beta_ = sigmoid_forward(b_.forward(x));
  a_pre_ = a_.forward(x);
  sp_ = bias_softplus_forward(a_pre_, dt_bias_->value);
  decay_ = neg_exp(A_log_->value);
  g_ = scan_input(channel_scale_forward(sp_, decay_));
  GatedDeltaOut o = gated_delta_forward(qn_, kn_, v, g_, scan_input(beta_), Tensor(), scale_, chunk_,
                                        training && gated_delta_keep_for_backward_default());
  scan_saved_ = o.saved;
  return o.o;
}

OryxLinearPath::Grads OryxGdnPath::backward(const Tensor& do_) {
  GatedDeltaGrads gd =
      gated_delta_backward(qn_, kn_, v_, g_, scan_input(beta_), Tensor(), scale_, do_, Tensor(), chunk_,
                           scan_saved_);
  ChannelScaleGrads cs = channel_scale_backward(sp_, decay_, grad_like(gd.dg, sp_));
  accumulate(A_log_, mul(cs.ds, scan_input(decay_)));  // d(-exp(a))/da = -exp(a); ds is f32 on cuda
  BiasSoftplusGrads bs = bias_softplus_backward(a_pre_, dt_bias_->value, cs.dx);
  accumulate(dt_bias_, bs.dbias);
  Grads g;
  g.dx = a_.backward(bs.dx);
  add_(g.dx, b_.backward(sigmoid_backward(beta_, grad_like(gd.dbeta, beta_))));
  g.dq = l2norm_backward(q_, q_rstd_, gd.dq);
  g.dk = l2norm_backward(k_, k_rstd_, gd.dk);
  g.dv = gd.dv;
  drop_saved();
  return g;
}

Tensor OryxGdnPath::infer(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                          Tensor& state) const {
  Tensor beta = sigmoid_forward(b_.apply(x));
  Tensor g = channel_scale_forward(bias_softplus_forward(a_.apply(x), dt_bias_->value),
                                   neg_exp(A_log_->value));
  return gated_delta_infer(l2norm_forward(q).y, l2norm_forward(k).y, v, scan_input(g),
                           scan_input(beta), scale_, chunk_, state);
}

void OryxGdnPath::drop_saved() {
  a_.drop_saved();
  b_.drop_saved();
  q_ = k_ = qn_ = kn_ = q_rstd_ = k_rstd_ = v_ = a_pre_ = sp_ = decay_ = g_ = beta_ = scan_saved_ = Tensor();
}

// ---- Mamba2 ----

OryxMamba2Path::OryxMamba2Path(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : heads_(heads_of(cfg)),
      chunk_(cfg.mamba2.chunk),
      dt_proj_(ps, prefix + ".dt_proj", cfg.d_model, heads_of(cfg), init_normal(cfg.init_std)),
      A_log_(ps.add(prefix + ".A_log", {heads_},
                    init_log_uniform(cfg.mamba2.a_min, cfg.mamba2.a_max), false)),
      dt_bias_(ps.add(prefix + ".dt_bias", {heads_},
                      init_dt_bias(cfg.mamba2.dt_min, cfg.mamba2.dt_max, cfg.mamba2.dt_floor),
                      false)),
      D_(ps.add(prefix + ".D", {heads_}, init_constant(1.0), false)) {
  AMOR_CHECK(chunk_ >= 0, "model.mamba2.chunk is {}; it must be >= 0 (0 = step-by-step)", chunk_);
  AMOR_CHECK(cfg.mamba2.a_max > 0 && cfg.mamba2.a_min <= cfg.mamba2.a_max,
             "model.mamba2.a_min/a_max are {}/{}; A_log = log(U[a_min, a_max]) needs a_max > 0",
             cfg.mamba2.a_min, cfg.mamba2.a_max);
}

Tensor OryxMamba2Path::forward(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                               bool training) {
  q_ = q;
  k_ = k;
  v_ = v;
  dt_pre_ = dt_proj_.forward(x);
  dt_ = scan_input(bias_softplus_forward(dt_pre_, dt_bias_->value));
  A_ = scan_input(neg_exp(A_log_->value));
  SsdOut o = ssd_forward(v, dt_, A_, k, q, scan_input(D_->value), Tensor(), chunk_,
                         training && ssd_keep_for_backward_default());
  scan_saved_ = o.saved;
  return o.y;
}

OryxLinearPath::Grads OryxMamba2Path::backward(const Tensor& do_) {
  SsdGrads s = ssd_backward(v_, dt_, A_, k_, q_, scan_input(D_->value), Tensor(), do_, Tensor(),
                            chunk_, scan_saved_);
  accumulate(A_log_, mul(s.dA, A_));  // d(-exp(a))/da = -exp(a) = A
  accumulate(D_, s.dD);
  BiasSoftplusGrads bs = bias_softplus_backward(dt_pre_, dt_bias_->value, grad_like(s.ddt, dt_pre_));
  accumulate(dt_bias_, bs.dbias);
  Grads g{dt_proj_.backward(bs.dx), s.dC, s.dB, s.dx};
  drop_saved();
  return g;
}

Tensor OryxMamba2Path::infer(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                             Tensor& state) const {
  Tensor dt = scan_input(bias_softplus_forward(dt_proj_.apply(x), dt_bias_->value));
  return ssd_infer(v, dt, scan_input(neg_exp(A_log_->value)), k, q, scan_input(D_->value), chunk_,
                   state);
}

void OryxMamba2Path::drop_saved() {
  dt_proj_.drop_saved();
  q_ = k_ = v_ = dt_pre_ = dt_ = A_ = scan_saved_ = Tensor();
}

}  // namespace amor::model
