#include "models/oryx/oryx_mixer.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention/attention.h"
#include "kernels/conv1d/conv1d.h"
#include "kernels/core/check.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "models/core/norm_eps.h"
#include "kernels/rope/rope.h"
#include "models/infer/kv_cache.h"
#include "models/infer/recurrent_state.h"
#include "models/oryx/oryx_modes.h"

namespace amor::model {

namespace {

int64_t kernel_of(const ModelConfig& cfg) {
  validate_oryx_config(cfg.oryx);
  int64_t k = cfg.oryx.linear == "gdn" ? cfg.gdn.conv_kernel : cfg.mamba2.conv_kernel;
  AMOR_CHECK(k >= 1, "model.{}.conv_kernel is {}; it must be >= 1", cfg.oryx.linear, k);
  return k;
}

int64_t heads_of(const ModelConfig& cfg) {
  AMOR_CHECK(cfg.head_dim > 0 && cfg.head_dim % 2 == 0 && cfg.d_model % cfg.head_dim == 0,
             "model.head_dim: oryx needs an even head_dim dividing d_model, got d_model {} and "
             "head_dim {}",
             cfg.d_model, cfg.head_dim);
  AMOR_CHECK(cfg.n_kv_heads == 0 || cfg.n_kv_heads == cfg.d_model / cfg.head_dim,
             "model.n_kv_heads is {}; oryx's heads are shared with the linear mixer, so it has "
             "MHA only (n_kv_heads 0)",
             cfg.n_kv_heads);
  return cfg.d_model / cfg.head_dim;
}

// PyTorch's Conv1d default (kaiming_uniform with a = sqrt(5)): U(+-1/sqrt(fan_in)), fan_in = K.
InitFn conv_init(int64_t kernel) {
  double b = 1.0 / std::sqrt(static_cast<double>(kernel));
  return init_uniform(-b, b);
}

// 1 at rows whose mode is linear (0), over [B,T,H,hd] on `device`: the linear output's mask. Built
// where it is used, as an embedding lookup of a two-row table (row 0 = ones for linear rows,
// row 1 = zeros for attention rows) by the [B,T] modes: only the table (2 x H*hd) and the modes
// cross to the device, not the [B,T,H,hd] mask (67 MB per layer in f32 at 8192 tokens and
// d 2048, which filled on the host and copied made Oryx's training step several times slower).
// 0 and 1 are exact in every float dtype, bf16 included.
Tensor linear_row_mask(const Tensor& modes_cpu, int64_t H, int64_t hd, DType dtype, Device device) {
  const int64_t B = modes_cpu.size(0), T = modes_cpu.size(1), width = H * hd;
  const DType host = dtype == DType::F64 ? DType::F64 : DType::F32;
  Tensor table = Tensor::zeros({2, width}, host);
  for (int64_t c = 0; c < width; ++c) table.set_item(c, 1.0);
  Tensor ids = Tensor::empty({B, T}, DType::I32);
  const uint8_t* md = modes_cpu.data<uint8_t>();
  int32_t* id = ids.data<int32_t>();
  for (int64_t r = 0; r < B * T; ++r) id[r] = md[r] == 0 ? 0 : 1;
  return embedding_forward(ids.to(device), table.to(dtype).to(device)).view({B, T, H, hd});
}

}  // namespace

OryxMixer::OryxMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : heads_(heads_of(cfg)),
      head_dim_(cfg.head_dim),
      kernel_(kernel_of(cfg)),
      rope_base_(cfg.rope_base),
      eps_(norm_eps_of(cfg).other),
      conv_silu_(cfg.oryx.linear == "gdn"),
      q_attn_(ps, prefix + ".q_attn_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)),
      q_lin_(ps, prefix + ".q_lin_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)),
      k_(ps, prefix + ".k_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)),
      v_(ps, prefix + ".v_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)),
      g_(ps, prefix + ".g_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)),
      q_lin_conv_(ps.add(prefix + ".q_lin_conv1d.weight", {cfg.d_model, kernel_},
                         conv_init(kernel_), true)),
      k_conv_(
          ps.add(prefix + ".k_conv1d.weight", {cfg.d_model, kernel_}, conv_init(kernel_), true)),
      v_conv_(
          ps.add(prefix + ".v_conv1d.weight", {cfg.d_model, kernel_}, conv_init(kernel_), true)),
      lin_(make_oryx_linear_path(ps, prefix, cfg)),
      o_norm_(ps.add(prefix + ".o_norm.weight", {cfg.head_dim}, init_constant(1.0), false)),
      o_(ps, prefix + ".o_proj", cfg.d_model, cfg.d_model, init_normal(cfg.init_std)) {}

Tensor OryxMixer::forward(const Tensor& x, const MixerContext& ctx) {
  AMOR_CHECK(x.dim() == 3, "OryxMixer: input is {}, expected [B,T,d]", x.str());
  const int64_t B = x.size(0), T = x.size(1), H = heads_, hd = head_dim_;
  const Tensor& modes = ctx.modes;
  AMOR_CHECK(modes.defined(),
             "OryxMixer: MixerContext.modes is required (u8 [B,T], 1 = attention)");
  AMOR_CHECK(modes.dtype() == DType::U8 && modes.shape() == Shape({B, T}),
             "OryxMixer: modes is {}, expected u8[{},{}]", modes.str(), B, T);
  modes_ = modes.to(x.device());
  Tensor modes_cpu = modes.to(Device::CPU);
  any_attention_ = any_linear_ = false;
  const uint8_t* md = modes_cpu.data<uint8_t>();
  for (int64_t i = 0; i < modes.numel(); ++i) (md[i] ? any_attention_ : any_linear_) = true;

  // The shared memories: keys and values at every token.
  k_pre_ = k_.forward(x);
  v_pre_ = v_.forward(x);
  kc_ = conv1d_forward(k_pre_, k_conv_->value, Tensor(), conv_silu_).y.view({B, T, H, hd});
  vc_ = conv1d_forward(v_pre_, v_conv_->value, Tensor(), conv_silu_).y.view({B, T, H, hd});

  Tensor o = Tensor::zeros({B, T, H, hd}, x.dtype(), x.device());
  if (any_attention_) {
    qa_rot_ = rope_forward(q_attn_.forward(x).view({B, T, H, hd}), 0, rope_base_);
    k_rot_ = rope_forward(kc_, 0, rope_base_);
    AttentionOutput a = attention_forward(qa_rot_, k_rot_, vc_, modes_);
    attn_o_ = a.o;
    lse_ = a.lse;
    add_(o, a.o);  // exactly zero at linear rows
  }
  if (any_linear_) {
    ql_pre_ = q_lin_.forward(x);
    Tensor ql = conv1d_forward(ql_pre_, q_lin_conv_->value, Tensor(), conv_silu_).y;
    lin_mask_ = linear_row_mask(modes_cpu, H, hd, x.dtype(), x.device());
    add_(o, mul(lin_->forward(x, ql.view({B, T, H, hd}), kc_, vc_, ctx.training), lin_mask_));
  }

  o_mix_ = o;
  z_ = g_.forward(x).view({B, T, H, hd});
  RMSNormOut n =
      rmsnorm_gated_forward(o_mix_, z_, o_norm_->value, hd, eps_, /*norm_before_gate=*/true);
  rstd_ = n.rstd;
  return o_.forward(n.y.view({B, T, H * hd}));
}

Tensor OryxMixer::backward(const Tensor& dy) {
  const int64_t B = dy.size(0), T = dy.size(1), H = heads_, hd = head_dim_;
  Tensor dn = o_.backward(dy).view({B, T, H, hd});
  RMSNormGatedGrads ng =
      rmsnorm_gated_backward(o_mix_, z_, o_norm_->value, rstd_, dn, hd, eps_, true);
  accumulate(o_norm_, ng.dw);
  Tensor dx = g_.backward(ng.dz.view({B, T, H * hd}));

  Tensor dkc = Tensor::zeros({B, T, H, hd}, dy.dtype(), dy.device());
  Tensor dvc = Tensor::zeros({B, T, H, hd}, dy.dtype(), dy.device());
  if (any_attention_) {
    AttentionGrads ag = attention_backward(qa_rot_, k_rot_, vc_, modes_, attn_o_, lse_, ng.dx);
    add_(dx, q_attn_.backward(rope_backward(ag.dq, 0, rope_base_).view({B, T, H * hd})));
    add_(dkc, rope_backward(ag.dk, 0, rope_base_));
    add_(dvc, ag.dv);
  }
  if (any_linear_) {
    OryxLinearPath::Grads lg = lin_->backward(mul(ng.dx, lin_mask_));
    add_(dx, lg.dx);
    add_(dkc, lg.dk);
    add_(dvc, lg.dv);
    Conv1dGrads cq = conv1d_backward(ql_pre_, q_lin_conv_->value, Tensor(), conv_silu_, Tensor(),
                                     lg.dq.view({B, T, H * hd}));
    accumulate(q_lin_conv_, cq.dweight);
    add_(dx, q_lin_.backward(cq.dx));
  }
  Conv1dGrads ck = conv1d_backward(k_pre_, k_conv_->value, Tensor(), conv_silu_, Tensor(),
                                   dkc.view({B, T, H * hd}));
  accumulate(k_conv_, ck.dweight);
  add_(dx, k_.backward(ck.dx));
  Conv1dGrads cv = conv1d_backward(v_pre_, v_conv_->value, Tensor(), conv_silu_, Tensor(),
                                   dvc.view({B, T, H * hd}));
  accumulate(v_conv_, cv.dweight);
  add_(dx, v_.backward(cv.dx));
  drop_saved();
  return dx;
}

void OryxMixer::drop_saved() {
  for (Linear* l : {&q_attn_, &q_lin_, &k_, &v_, &g_, &o_}) l->drop_saved();
  lin_->drop_saved();
  modes_ = lin_mask_ = ql_pre_ = k_pre_ = v_pre_ = qa_rot_ = k_rot_ = kc_ = vc_ = attn_o_ = lse_ =
      o_mix_ = z_ = rstd_ = Tensor();
}

namespace {
struct OryxCache final : MixerCache {
  KvCache kv;
  Tensor q_lin_conv, k_conv, v_conv;  // the last K-1 inputs of each short conv
  Tensor linear_state;                // the linear path's scan state

  void append_rows(MixerCache& other) override {
    OryxCache& o = cache_as<OryxCache>(other, "OryxMixer");
    kv.append_rows(o.kv);
    q_lin_conv = join_states(q_lin_conv, o.q_lin_conv, "OryxMixer q conv state");
    k_conv = join_states(k_conv, o.k_conv, "OryxMixer k conv state");
    v_conv = join_states(v_conv, o.v_conv, "OryxMixer v conv state");
    linear_state = join_states(linear_state, o.linear_state, "OryxMixer linear state");
    o = OryxCache();
  }
  void reserve_tokens(int64_t tokens) override { kv.reserve_tokens(tokens); }
  void kv_caches(std::vector<KvCache*>& out) override { out.push_back(&kv); }
};
}  // namespace

std::unique_ptr<MixerCache> OryxMixer::new_cache() const { return std::make_unique<OryxCache>(); }

// forward() without saving, over the cache. Both memories take every token; the linear query and
// the linear path run at every token too (the query's conv state and the scan must be current
// when a segment switches to linear), attention's query only when some token is in attention.
Tensor OryxMixer::infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) {
  OryxCache& c = cache_as<OryxCache>(cache, "OryxMixer");
  AMOR_CHECK(x.dim() == 3, "OryxMixer::infer: input is {}, expected [B,T,d]", x.str());
  const int64_t B = x.size(0), T = x.size(1), H = heads_, hd = head_dim_;
  AMOR_CHECK(ctx.modes.defined() && ctx.modes.dtype() == DType::U8 &&
                 ctx.modes.shape() == Shape({B, T}),
             "OryxMixer::infer: modes is {}, expected u8[{},{}] (1 = attention)",
             ctx.modes.defined() ? ctx.modes.str() : std::string("undefined"), B, T);
  Tensor modes_cpu = ctx.modes.to(Device::CPU);
  bool any_attention = false, any_linear = false;
  const uint8_t* md = modes_cpu.data<uint8_t>();
  for (int64_t i = 0; i < modes_cpu.numel(); ++i) (md[i] ? any_attention : any_linear) = true;

  Tensor kc = conv_infer(k_.apply(x), k_conv_->value, Tensor(), conv_silu_, c.k_conv)
                  .view({B, T, H, hd});
  Tensor vc = conv_infer(v_.apply(x), v_conv_->value, Tensor(), conv_silu_, c.v_conv)
                  .view({B, T, H, hd});
  Tensor ql = conv_infer(q_lin_.apply(x), q_lin_conv_->value, Tensor(), conv_silu_, c.q_lin_conv)
                  .view({B, T, H, hd});
  Tensor lin_o = lin_->infer(x, ql, kc, vc, c.linear_state);
  const NextPositions at = c.kv.next_positions(T);
  c.kv.append(rope_forward_at(kc, at, rope_base_), vc);

  Tensor o = Tensor::zeros({B, T, H, hd}, x.dtype(), x.device());
  if (any_attention) {
    Tensor qa = rope_forward_at(q_attn_.apply(x).view({B, T, H, hd}), at, rope_base_);
    add_(o, c.kv.attend(qa, ctx.modes.to(x.device())));  // exactly zero at linear rows
  }
  if (any_linear) add_(o, mul(lin_o, linear_row_mask(modes_cpu, H, hd, x.dtype(), x.device())));
  RMSNormOut n = rmsnorm_gated_forward(o, g_.apply(x).view({B, T, H, hd}), o_norm_->value, hd,
                                       eps_, /*norm_before_gate=*/true);
  return o_.apply(n.y.view({B, T, H * hd}));
}

bool oryx_param_is_mixer_specific(const std::string& name) {
  static const char* kSuffixes[] = {".q_attn_proj.weight",
                                    ".q_lin_proj.weight",
                                    ".q_lin_conv1d.weight",
                                    ".a_proj.weight",
                                    ".b_proj.weight",
                                    ".dt_proj.weight",
                                    ".A_log",
                                    ".dt_bias",
                                    ".D"};
  for (const char* s : kSuffixes) {
    std::string suffix(s);
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  }
  return false;
}

double oryx_shared_fraction(const ParamStore& ps) {
  int64_t total = 0, specific = 0;
  for (const auto& p : ps.params()) {
    total += p->value.numel();
    if (oryx_param_is_mixer_specific(p->name)) specific += p->value.numel();
  }
  return total ? static_cast<double>(total - specific) / static_cast<double>(total) : 0.0;
}

}  // namespace amor::model
