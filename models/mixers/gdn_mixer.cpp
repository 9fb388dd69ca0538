#include "models/mixers/gdn_mixer.h"

#include <cmath>

#include "kernels/conv1d/conv1d.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gated_delta/gated_delta.h"
#include "models/core/scan_dtype.h"
#include "kernels/l2norm/l2norm.h"
#include "models/core/norm_eps.h"
#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "models/infer/recurrent_state.h"

namespace amor::model {

namespace {

constexpr double kL2NormEps = 1e-6;  // fla's l2norm on q and k

// A_log = log(A), A ~ U[a_min, a_max] (fla: U[0, 16]). A draw of exactly 0 would give
// A_log = -inf (a head that never decays, with a NaN gradient), so such draws are redrawn.
InitFn init_a_log(double a_min, double a_max) {
  return [a_min, a_max](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(a_min, a_max);
    for (int64_t i = 0; i < t.numel(); ++i) {
      double a = u(rng);
      while (a <= 0.0) a = u(rng);
      t.set_item(i, std::log(a));
    }
  };
}

// Mamba2's dt_bias: dt log-uniform in [dt_min, dt_max], floored at dt_floor, and dt_bias the
// inverse softplus of dt, so that softplus(0 + dt_bias) = dt at init. Without it the decay is
// softplus(0) = log 2 scaled by A, and the state forgets within a few steps.
InitFn init_dt_bias(double dt_min, double dt_max, double dt_floor) {
  return [=](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(std::log(dt_min), std::log(dt_max));
    for (int64_t i = 0; i < t.numel(); ++i) {
      double dt = std::max(std::exp(u(rng)), dt_floor);
      t.set_item(i, dt + std::log(-std::expm1(-dt)));
    }
  };
}

// -exp(A_log) per head. A_log has H entries, so this runs on the host; on a GPU it is one tiny
// copy each way (an elementwise exp op would remove it).
Tensor neg_exp(const Tensor& a_log) {
  Tensor c = a_log.to(Device::CPU).clone();
  for (int64_t i = 0; i < c.numel(); ++i) c.set_item(i, -std::exp(c.item(i)));
  return c.to(a_log.device());
}

}  // namespace

GdnDims gdn_dims(const ModelConfig& cfg) {
  const GdnConfig& g = cfg.gdn;
  AMOR_CHECK(cfg.d_model > 0, "model.d_model is {}, expected > 0", cfg.d_model);
  AMOR_CHECK(g.head_dim > 0, "model.gdn.head_dim is {}, expected > 0", g.head_dim);
  AMOR_CHECK(g.qk_ratio > 0, "model.gdn.qk_ratio is {}, expected > 0", g.qk_ratio);
  const int64_t H = std::llround(g.qk_ratio * static_cast<double>(cfg.d_model) /
                                 static_cast<double>(g.head_dim));
  AMOR_CHECK(H >= 1,
             "model.gdn.qk_ratio {} gives round({} * d_model {} / head_dim {}) = 0 heads; "
             "expected at least one",
             g.qk_ratio, g.qk_ratio, cfg.d_model, g.head_dim);
  const double v_exact = g.v_expand * static_cast<double>(g.head_dim);
  const int64_t V = std::llround(v_exact);
  AMOR_CHECK(g.v_expand > 0 && V >= 1 && std::abs(v_exact - static_cast<double>(V)) < 1e-9,
             "model.gdn.v_expand is {}: v_expand * head_dim {} = {} must be a positive integer "
             "(the value head dim)",
             g.v_expand, g.head_dim, v_exact);
  AMOR_CHECK(g.conv_kernel >= 1, "model.gdn.conv_kernel is {}, expected >= 1", g.conv_kernel);
  AMOR_CHECK(g.chunk >= 0, "model.gdn.chunk is {}, expected a chunk length > 0 (or 0: recurrence)",
             g.chunk);
  AMOR_CHECK(g.norm_eps > 0, "model.gdn.norm_eps is {}, expected > 0", g.norm_eps);
  AMOR_CHECK(g.dt_min > 0 && g.dt_min <= g.dt_max,
             "model.gdn.dt_min {} and model.gdn.dt_max {}: expected 0 < dt_min <= dt_max", g.dt_min,
             g.dt_max);
  AMOR_CHECK(g.dt_floor > 0, "model.gdn.dt_floor is {}, expected > 0", g.dt_floor);
  AMOR_CHECK(g.a_min >= 0 && g.a_min <= g.a_max && g.a_max > 0,
             "model.gdn.a_min {} and model.gdn.a_max {}: expected 0 <= a_min <= a_max, a_max > 0",
             g.a_min, g.a_max);
  AMOR_CHECK(g.init == "fla_layer" || g.init == "fla_model",
             "model.gdn.init is '{}', expected one of fla_layer, fla_model", g.init);
  return {H, g.head_dim, V};
}

GdnMixer::ConvBranch::ConvBranch(ParamStore& ps, const std::string& prefix, const std::string& name,
                                 int64_t d, int64_t channels, const ModelConfig& cfg)
    : proj(ps, prefix + "." + name + "_proj", d, channels, init_normal(cfg.init_std)) {
  // fla_layer: fla's ShortConvolution is an nn.Conv1d and keeps PyTorch's default (kaiming_uniform,
  // a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = kernel for a depthwise conv; so the
  // layer built alone, as the AMOR authors do. fla_model: fla's GatedDeltaNetPreTrainedModel
  // _init_weights re-draws every Conv1d as N(0, initializer_range).
  const int64_t kernel = cfg.gdn.conv_kernel;
  const double bound = 1.0 / std::sqrt(static_cast<double>(kernel));
  conv_w = ps.add(prefix + "." + name + "_conv1d.weight", {channels, kernel},
                  cfg.gdn.init == "fla_model" ? init_normal(cfg.init_std)
                                              : init_uniform(-bound, bound),
                  /*weight_decay=*/true);
}

Tensor GdnMixer::ConvBranch::forward(const Tensor& x) {
  pre_conv_ = proj.forward(x);
  return conv1d_forward(pre_conv_, conv_w->value, Tensor(), /*silu=*/true).y;
}

Tensor GdnMixer::ConvBranch::backward(const Tensor& dy) {
  Conv1dGrads g = conv1d_backward(pre_conv_, conv_w->value, Tensor(), true, Tensor(), dy);
  accumulate(conv_w, g.dweight);
  pre_conv_ = Tensor();
  return proj.backward(g.dx);
}

void GdnMixer::ConvBranch::drop_saved() {
  proj.drop_saved();
  pre_conv_ = Tensor();
}

GdnMixer::GdnMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : GdnMixer(ps, prefix, cfg, gdn_dims(cfg)) {}

GdnMixer::GdnMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg,
                   const GdnDims& dims)
    : heads_(dims.heads),
      head_k_(dims.head_k),
      head_v_(dims.head_v),
      chunk_(cfg.gdn.chunk),
      norm_eps_(norm_eps_of(cfg).gdn),
      q_(ps, prefix, "q", cfg.d_model, heads_ * head_k_, cfg),
      k_(ps, prefix, "k", cfg.d_model, heads_ * head_k_, cfg),
      v_(ps, prefix, "v", cfg.d_model, heads_ * head_v_, cfg),
      a_(ps, prefix + ".a_proj", cfg.d_model, heads_, init_normal(cfg.init_std)),
      b_(ps, prefix + ".b_proj", cfg.d_model, heads_, init_normal(cfg.init_std)),
      gate_(ps, prefix + ".g_proj", cfg.d_model, heads_ * head_v_, init_normal(cfg.init_std)),
      o_(ps, prefix + ".o_proj", heads_ * head_v_, cfg.d_model, init_normal(cfg.init_std)) {
  const GdnConfig& g = cfg.gdn;
  a_log_ = ps.add(prefix + ".A_log", {heads_}, init_a_log(g.a_min, g.a_max), false);
  dt_bias_ = ps.add(prefix + ".dt_bias", {heads_}, init_dt_bias(g.dt_min, g.dt_max, g.dt_floor),
                    false);
  o_norm_w_ = ps.add(prefix + ".o_norm.weight", {head_v_}, init_constant(1.0), false);
}

Tensor GdnMixer::forward(const Tensor& x, const MixerContext& ctx) {
  const int64_t B = x.size(0), T = x.size(1), H = heads_, K = head_k_, V = head_v_;
  qc_ = q_.forward(x).view({B, T, H, K});
  L2NormOut qn = l2norm_forward(qc_, kL2NormEps);
  qn_ = qn.y;
  q_rstd_ = qn.rstd;
  kc_ = k_.forward(x).view({B, T, H, K});
  L2NormOut kn = l2norm_forward(kc_, kL2NormEps);
  kn_ = kn.y;
  k_rstd_ = kn.rstd;
  v4_ = v_.forward(x).view({B, T, H, V});

  beta_ = sigmoid_forward(b_.forward(x));
  a_in_ = a_.forward(x);
  dt_ = bias_softplus_forward(a_in_, dt_bias_->value);
  neg_a_ = neg_exp(a_log_->value);
  g_ = scan_input(channel_scale_forward(dt_, neg_a_));

  const double scale = gated_delta_default_scale(K);
  // In training the GPU scan keeps its intermediates (gam, W, Tm, chunk states, Vn: about 0.75 KB
  // per token and head for K 64, V 128 in bf16) from forward to backward, so the backward does not
  // run the forward's prepare and state passes again (15% of the scan's forward + backward time at
  // the 1.5B preset's shape, tests/cuda/RESULTS.md); AMOR_GDN_RECOMPUTE=1 trades that time back for
  // the memory (gated_delta_keep_for_backward_default). The same bits either way.
  const bool keep = ctx.training && gated_delta_keep_for_backward_default();
  GatedDeltaOut so =
      gated_delta_forward(qn_, kn_, v4_, g_, scan_input(beta_), Tensor(), scale, chunk_, keep);
  scan_o_ = so.o;
  scan_saved_ = so.saved;
  z_ = gate_.forward(x).view({B, T, H, V});
  RMSNormOut n = rmsnorm_gated_forward(scan_o_, z_, o_norm_w_->value, V, norm_eps_,
                                       /*norm_before_gate=*/true);
  norm_rstd_ = n.rstd;
  return o_.forward(n.y.view({B, T, H * V}));
}

Tensor GdnMixer::backward(const Tensor& dy) {
  const int64_t B = dy.size(0), T = dy.size(1), H = heads_, K = head_k_, V = head_v_;
  Tensor dn = o_.backward(dy).view({B, T, H, V});
  RMSNormGatedGrads ng = rmsnorm_gated_backward(scan_o_, z_, o_norm_w_->value, norm_rstd_, dn, V,
                                                norm_eps_, /*norm_before_gate=*/true);
  accumulate(o_norm_w_, ng.dw);
  Tensor dx = gate_.backward(ng.dz.view({B, T, H * V}));

  GatedDeltaGrads sg = gated_delta_backward(qn_, kn_, v4_, g_, scan_input(beta_), Tensor(),
                                            gated_delta_default_scale(K), ng.dx, Tensor(), chunk_,
                                            scan_saved_);

  // g = neg_a * dt per head: d neg_a / d A_log = neg_a, so dA_log = neg_a * sum(dg * dt).
  ChannelScaleGrads cs = channel_scale_backward(dt_, neg_a_, grad_like(sg.dg, dt_));
  accumulate(a_log_, mul(cs.ds, scan_input(neg_a_)));  // ds is f32 on cuda
  BiasSoftplusGrads sp = bias_softplus_backward(a_in_, dt_bias_->value, cs.dx);
  accumulate(dt_bias_, sp.dbias);
  add_(dx, a_.backward(sp.dx));
  add_(dx, b_.backward(sigmoid_backward(beta_, grad_like(sg.dbeta, beta_))));

  add_(dx, q_.backward(l2norm_backward(qc_, q_rstd_, sg.dq).view({B, T, H * K})));
  add_(dx, k_.backward(l2norm_backward(kc_, k_rstd_, sg.dk).view({B, T, H * K})));
  add_(dx, v_.backward(sg.dv.view({B, T, H * V})));

  drop_saved();
  return dx;
}

void GdnMixer::drop_saved() {
  for (ConvBranch* b : {&q_, &k_, &v_}) b->drop_saved();
  for (Linear* l : {&a_, &b_, &gate_, &o_}) l->drop_saved();
  qc_ = q_rstd_ = kc_ = k_rstd_ = qn_ = kn_ = v4_ = Tensor();
  a_in_ = dt_ = neg_a_ = g_ = beta_ = scan_o_ = scan_saved_ = z_ = norm_rstd_ = Tensor();
}

namespace {
struct GdnCache final : MixerCache {
  Tensor q_conv, k_conv, v_conv;  // the last K-1 inputs of each short conv [B,C,K-1]
  Tensor state;                   // [B,H,K,V]
  // -exp(A_log), made at the first call: the weights do not change during inference, and it is
  // computed on the host (two copies and a device sync per layer per step otherwise; none may
  // happen inside a captured decode step, decode_graph.h).
  Tensor neg_a;

  void append_rows(MixerCache& other) override {
    GdnCache& o = cache_as<GdnCache>(other, "GdnMixer");
    q_conv = join_states(q_conv, o.q_conv, "GdnMixer q conv state");
    k_conv = join_states(k_conv, o.k_conv, "GdnMixer k conv state");
    v_conv = join_states(v_conv, o.v_conv, "GdnMixer v conv state");
    state = join_states(state, o.state, "GdnMixer delta-rule state");
    if (!neg_a.defined()) neg_a = o.neg_a;
    o = GdnCache();
  }
};
}  // namespace

std::unique_ptr<MixerCache> GdnMixer::new_cache() const { return std::make_unique<GdnCache>(); }

// forward() without saving, each recurrent part continuing from the cache.
Tensor GdnMixer::infer(const Tensor& x, const MixerContext&, MixerCache& cache) {
  GdnCache& c = cache_as<GdnCache>(cache, "GdnMixer");
  const int64_t B = x.size(0), T = x.size(1), H = heads_, K = head_k_, V = head_v_;
  auto branch = [&](const ConvBranch& br, Tensor& state) {
    return conv_infer(br.proj.apply(x), br.conv_w->value, Tensor(), /*silu=*/true, state);
  };
  Tensor q = l2norm_forward(branch(q_, c.q_conv).view({B, T, H, K}), kL2NormEps).y;
  Tensor k = l2norm_forward(branch(k_, c.k_conv).view({B, T, H, K}), kL2NormEps).y;
  Tensor v = branch(v_, c.v_conv).view({B, T, H, V});
  Tensor beta = sigmoid_forward(b_.apply(x));
  if (!c.neg_a.defined()) c.neg_a = neg_exp(a_log_->value);
  Tensor g = channel_scale_forward(bias_softplus_forward(a_.apply(x), dt_bias_->value), c.neg_a);
  Tensor o = gated_delta_infer(q, k, v, scan_input(g), scan_input(beta), gated_delta_default_scale(K),
                               chunk_, c.state);
  RMSNormOut n = rmsnorm_gated_forward(o, gate_.apply(x).view({B, T, H, V}), o_norm_w_->value, V,
                                       norm_eps_, /*norm_before_gate=*/true);
  return o_.apply(n.y.view({B, T, H * V}));
}

}  // namespace amor::model
