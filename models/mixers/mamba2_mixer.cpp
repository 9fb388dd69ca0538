#include "models/mixers/mamba2_mixer.h"

#include <algorithm>
#include <cmath>

#include "kernels/conv1d/conv1d.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "kernels/ssd/ssd.h"
#include "models/core/norm_eps.h"
#include "models/core/scan_dtype.h"
#include "models/infer/recurrent_state.h"

namespace amor::model {

namespace {

// mamba_ssm: A_log = log(U[lo, hi]): decay rates spread over [lo, hi] so heads keep memory at
// many scales. hf (transformers' Mamba2Mixer, which the AMOR authors build on): A_log = log(h + 1)
// for head h, the same spread without randomness; it draws nothing from the RNG.
InitFn init_a_log(const Mamba2Config& m) {
  if (m.init == "hf")
    return [](Tensor& t, std::mt19937_64&) {
      for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, std::log(static_cast<double>(i + 1)));
    };
  return [lo = m.a_min, hi = m.a_max](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, std::log(u(rng)));
  };
}

// dt_bias = softplus^-1(dt), dt log-uniform in [dt_min, dt_max] floored at dt_floor, so that
// softplus(0 + dt_bias) starts at dt. softplus^-1(y) = y + log(-expm1(-y)), stable for small y.
InitFn init_dt_bias(double dt_min, double dt_max, double dt_floor) {
  return [=](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(std::log(dt_min), std::log(dt_max));
    for (int64_t i = 0; i < t.numel(); ++i) {
      double dt = std::max(std::exp(u(rng)), dt_floor);
      t.set_item(i, dt + std::log(-std::expm1(-dt)));
    }
  };
}

void check_config(const ModelConfig& cfg) {
  const Mamba2Config& m = cfg.mamba2;
  AMOR_CHECK(m.expand >= 1, "model.mamba2.expand is {}, expected >= 1", m.expand);
  AMOR_CHECK(m.head_dim > 0 && (m.expand * cfg.d_model) % m.head_dim == 0,
             "model.mamba2.head_dim {} does not divide d_inner = expand * d_model = {}",
             m.head_dim, m.expand * cfg.d_model);
  int64_t heads = m.expand * cfg.d_model / m.head_dim;
  AMOR_CHECK(m.n_groups > 0 && heads % m.n_groups == 0,
             "model.mamba2.n_groups {} does not divide the {} Mamba2 heads", m.n_groups, heads);
  AMOR_CHECK(m.d_state > 0, "model.mamba2.d_state is {}, expected > 0", m.d_state);
  AMOR_CHECK(m.conv_kernel >= 1, "model.mamba2.conv_kernel is {}, expected >= 1", m.conv_kernel);
  AMOR_CHECK(m.chunk >= 0, "model.mamba2.chunk is {}, expected >= 0 (0 = step-by-step scan)",
             m.chunk);
  AMOR_CHECK(m.dt_min > 0 && m.dt_min <= m.dt_max,
             "model.mamba2.dt_min {} / dt_max {}: expected 0 < dt_min <= dt_max", m.dt_min,
             m.dt_max);
  AMOR_CHECK(m.dt_floor > 0, "model.mamba2.dt_floor is {}, expected > 0", m.dt_floor);
  AMOR_CHECK(m.a_min > 0 && m.a_min <= m.a_max,
             "model.mamba2.a_min {} / a_max {}: expected 0 < a_min <= a_max", m.a_min, m.a_max);
  AMOR_CHECK(m.init == "mamba_ssm" || m.init == "hf",
             "model.mamba2.init is '{}', expected one of mamba_ssm, hf", m.init);
}

int64_t checked_d_inner(const ModelConfig& cfg) {
  check_config(cfg);
  return cfg.mamba2.expand * cfg.d_model;
}

}  // namespace

Mamba2Mixer::Mamba2Mixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : d_model_(cfg.d_model),
      d_inner_(checked_d_inner(cfg)),
      heads_(d_inner_ / cfg.mamba2.head_dim),
      head_dim_(cfg.mamba2.head_dim),
      groups_(cfg.mamba2.n_groups),
      d_state_(cfg.mamba2.d_state),
      conv_kernel_(cfg.mamba2.conv_kernel),
      chunk_(cfg.mamba2.chunk),
      eps_(norm_eps_of(cfg).mamba2),
      in_proj_(ps.add(prefix + ".in_proj.weight",
                      {2 * d_inner_ + 2 * groups_ * d_state_ + heads_, d_model_},
                      init_normal(cfg.init_std), /*weight_decay=*/true)),
      conv_w_(ps.add(prefix + ".conv1d.weight", {d_inner_ + 2 * groups_ * d_state_, conv_kernel_},
                     init_uniform(-1.0 / std::sqrt(double(conv_kernel_)),
                                  1.0 / std::sqrt(double(conv_kernel_))),
                     /*weight_decay=*/true)),
      conv_b_(ps.add(prefix + ".conv1d.bias", {d_inner_ + 2 * groups_ * d_state_},
                     init_uniform(-1.0 / std::sqrt(double(conv_kernel_)),
                                  1.0 / std::sqrt(double(conv_kernel_))),
                     /*weight_decay=*/false)),
      dt_bias_(ps.add(prefix + ".dt_bias", {heads_},
                      init_dt_bias(cfg.mamba2.dt_min, cfg.mamba2.dt_max, cfg.mamba2.dt_floor),
                      /*weight_decay=*/false)),
      a_log_(ps.add(prefix + ".A_log", {heads_}, init_a_log(cfg.mamba2),
                    /*weight_decay=*/false)),
      d_skip_(ps.add(prefix + ".D", {heads_}, init_constant(1.0), /*weight_decay=*/false)),
      norm_w_(ps.add(prefix + ".norm.weight", {d_inner_}, init_constant(1.0),
                     /*weight_decay=*/false)),
      out_proj_(ps, prefix + ".out_proj", d_inner_, d_model_, init_normal(cfg.init_std)) {}

int64_t Mamba2Mixer::part_rows(Part p) const {
  switch (p) {
    case kZ:
    case kX: return d_inner_;
    case kB:
    case kC: return groups_ * d_state_;
    default: return heads_;
  }
}

int64_t Mamba2Mixer::part_offset(Part p) const {
  int64_t off = 0;
  for (int q = kZ; q < p; ++q) off += part_rows(Part(q));
  return off;
}

Tensor Mamba2Mixer::in_weight(Part p) const {
  return in_proj_->value.slice_flat(part_offset(p) * d_model_, {part_rows(p), d_model_});
}

// conv1d's channels are in_proj's rows from kX on: [x | B | C].
Tensor Mamba2Mixer::conv_weight(Part p) const {
  return conv_w_->value.slice_flat((part_offset(p) - d_inner_) * conv_kernel_,
                                   {part_rows(p), conv_kernel_});
}

Tensor Mamba2Mixer::conv_bias(Part p) const {
  return conv_b_->value.slice_flat(part_offset(p) - d_inner_, {part_rows(p)});
}

// H numbers: computed on the host and copied to the parameters' device, since no op takes an exp.
Tensor Mamba2Mixer::neg_exp_a_log() const {
  Tensor a_log = a_log_->value.to(Device::CPU);
  Tensor a = Tensor::empty(a_log.shape(), a_log.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) a.set_item(i, -std::exp(a_log.item(i)));
  return a.to(a_log_->value.device());
}

Tensor Mamba2Mixer::forward(const Tensor& x, const MixerContext& ctx) {
  AMOR_CHECK(x.dim() == 3 && x.size(2) == d_model_, "Mamba2Mixer: input {} is not [B,T,{}]",
             x.str(), d_model_);
  const int64_t B = x.size(0), T = x.size(1);
  x_in_ = x;
  for (int p = kZ; p < kParts; ++p) pre_[p] = linear_forward(x, in_weight(Part(p)));
  for (Part p : {kX, kB, kC})
    post_[p] = conv1d_forward(pre_[p], conv_weight(p), conv_bias(p), /*silu=*/true).y;
  post_[kDt] = scan_input(bias_softplus_forward(pre_[kDt], dt_bias_->value));
  a_ = scan_input(neg_exp_a_log());
  // In training the GPU scan keeps its intermediates (the chunk log-decay cumsums and the bf16
  // state entering every chunk: 260 B per token and head at P 64, N 128, chunk 64) from forward to
  // backward, so the backward does not rerun the forward's state passes (~430 of 2820 us of the
  // scan's forward + backward at the 1.5B preset's shape, tests/cuda/RESULTS.md's kernel table);
  // AMOR_SSD_RECOMPUTE=1 trades that time back for the memory (ssd_keep_for_backward_default).
  // The same bits either way; nothing is kept on the CPU.
  const bool keep = ctx.training && ssd_keep_for_backward_default();
  SsdOut so = ssd_forward(post_[kX].view({B, T, heads_, head_dim_}), post_[kDt], a_,
                          post_[kB].view({B, T, groups_, d_state_}),
                          post_[kC].view({B, T, groups_, d_state_}), scan_input(d_skip_->value),
                          Tensor(), chunk_, keep);
  ssd_y_ = so.y.view({B, T, d_inner_});
  ssd_saved_ = so.saved;
  RMSNormOut n = rmsnorm_gated_forward(ssd_y_, pre_[kZ], norm_w_->value, d_inner_ / groups_, eps_,
                                       /*norm_before_gate=*/false);
  rstd_ = n.rstd;
  return out_proj_.forward(n.y);
}

Tensor Mamba2Mixer::backward(const Tensor& dy) {
  const int64_t B = dy.size(0), T = dy.size(1);
  Tensor d_pre[kParts];

  RMSNormGatedGrads ng = rmsnorm_gated_backward(ssd_y_, pre_[kZ], norm_w_->value, rstd_,
                                                out_proj_.backward(dy), d_inner_ / groups_, eps_,
                                                /*norm_before_gate=*/false);
  accumulate(norm_w_, ng.dw);
  d_pre[kZ] = ng.dz;

  SsdGrads sg = ssd_backward(post_[kX].view({B, T, heads_, head_dim_}), post_[kDt], a_,
                             post_[kB].view({B, T, groups_, d_state_}),
                             post_[kC].view({B, T, groups_, d_state_}), scan_input(d_skip_->value),
                             Tensor(), ng.dx.view({B, T, heads_, head_dim_}), Tensor(), chunk_,
                             ssd_saved_);
  accumulate(d_skip_, sg.dD);
  accumulate(a_log_, mul(sg.dA, a_));  // dA/dA_log = -exp(A_log) = A

  BiasSoftplusGrads dtg =
      bias_softplus_backward(pre_[kDt], dt_bias_->value, grad_like(sg.ddt, pre_[kDt]));
  accumulate(dt_bias_, dtg.dbias);
  d_pre[kDt] = dtg.dx;

  const Tensor d_post[kParts] = {Tensor(), sg.dx.view({B, T, d_inner_}),
                                 sg.dB.view({B, T, groups_ * d_state_}),
                                 sg.dC.view({B, T, groups_ * d_state_}), Tensor()};
  for (Part p : {kX, kB, kC}) {
    Conv1dGrads cg = conv1d_backward(pre_[p], conv_weight(p), conv_bias(p), /*silu=*/true,
                                     Tensor(), d_post[p]);
    Tensor gw = conv_w_->grad.slice_flat((part_offset(p) - d_inner_) * conv_kernel_,
                                         {part_rows(p), conv_kernel_});
    Tensor gb = conv_b_->grad.slice_flat(part_offset(p) - d_inner_, {part_rows(p)});
    add_(gw, cg.dweight);
    add_(gb, cg.dbias);
    d_pre[p] = cg.dx;
  }

  Tensor dx;
  for (int p = kZ; p < kParts; ++p) {
    LinearGrads lg = linear_backward(x_in_, in_weight(Part(p)), d_pre[p]);
    Tensor gw = in_proj_->grad.slice_flat(part_offset(Part(p)) * d_model_,
                                          {part_rows(Part(p)), d_model_});
    add_(gw, lg.dw);
    if (dx.defined())
      add_(dx, lg.dx);
    else
      dx = lg.dx;
  }

  drop_saved();
  return dx;
}

void Mamba2Mixer::drop_saved() {
  out_proj_.drop_saved();
  x_in_ = a_ = ssd_y_ = rstd_ = ssd_saved_ = Tensor();
  for (int p = kZ; p < kParts; ++p) pre_[p] = post_[p] = Tensor();
}

namespace {
struct Mamba2Cache final : MixerCache {
  Tensor conv[3];  // x, B, C: the last K-1 conv inputs [B,C,K-1]
  Tensor ssd;      // [B,H,P,N]
  // The scan's A = -exp(A_log) and D as it takes them, made at the first call: the weights do
  // not change during inference, and A is computed on the host (two copies and a device sync per
  // layer per step otherwise; none may happen inside a captured decode step, decode_graph.h).
  Tensor a, d;

  void append_rows(MixerCache& other) override {
    Mamba2Cache& o = cache_as<Mamba2Cache>(other, "Mamba2Mixer");
    for (int p = 0; p < 3; ++p) conv[p] = join_states(conv[p], o.conv[p], "Mamba2Mixer conv state");
    ssd = join_states(ssd, o.ssd, "Mamba2Mixer scan state");
    if (!a.defined()) {
      a = o.a;
      d = o.d;
    }
    o = Mamba2Cache();
  }
};
}  // namespace

std::unique_ptr<MixerCache> Mamba2Mixer::new_cache() const {
  return std::make_unique<Mamba2Cache>();
}

// forward() without saving, each recurrent part continuing from the cache.
Tensor Mamba2Mixer::infer(const Tensor& x, const MixerContext&, MixerCache& cache) {
  Mamba2Cache& c = cache_as<Mamba2Cache>(cache, "Mamba2Mixer");
  AMOR_CHECK(x.dim() == 3 && x.size(2) == d_model_, "Mamba2Mixer::infer: input {} is not [B,T,{}]",
             x.str(), d_model_);
  const int64_t B = x.size(0), T = x.size(1);
  Tensor pre[kParts], post[kParts];
  for (int p = kZ; p < kParts; ++p) pre[p] = linear_forward(x, in_weight(Part(p)));
  for (Part p : {kX, kB, kC})
    post[p] = conv_infer(pre[p], conv_weight(p), conv_bias(p), /*silu=*/true, c.conv[p - kX]);
  post[kDt] = scan_input(bias_softplus_forward(pre[kDt], dt_bias_->value));
  if (!c.a.defined()) {
    c.a = scan_input(neg_exp_a_log());
    c.d = scan_input(d_skip_->value);
  }
  Tensor y = ssd_infer(post[kX].view({B, T, heads_, head_dim_}), post[kDt], c.a,
                       post[kB].view({B, T, groups_, d_state_}),
                       post[kC].view({B, T, groups_, d_state_}), c.d, chunk_, c.ssd)
                 .view({B, T, d_inner_});
  RMSNormOut n = rmsnorm_gated_forward(y, pre[kZ], norm_w_->value, d_inner_ / groups_, eps_,
                                       /*norm_before_gate=*/false);
  return out_proj_.apply(n.y);
}

}  // namespace amor::model
