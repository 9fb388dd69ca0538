#include "models/amor/amor_attention.h"

#include "kernels/attention/attention.h"
#include "kernels/core/check.h"
#include "kernels/core/env_switch.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "kernels/rope/rope.h"
#include "models/amor/row_ops.h"

namespace amor::model {

namespace {

int64_t kv_heads_of(const ModelConfig& c) {
  AMOR_CHECK(c.head_dim > 0 && c.d_model % c.head_dim == 0,
             "model: d_model {} is not a multiple of head_dim {}", c.d_model, c.head_dim);
  const int64_t h = c.d_model / c.head_dim;
  AMOR_CHECK(c.n_kv_heads >= 0 && (c.n_kv_heads == 0 || h % c.n_kv_heads == 0),
             "model: {} attention heads are not a multiple of n_kv_heads {}", h, c.n_kv_heads);
  return c.n_kv_heads > 0 ? c.n_kv_heads : h;
}

}  // namespace

AmorAttention::AmorAttention(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : heads_(cfg.d_model / (cfg.head_dim > 0 ? cfg.head_dim : 1)),
      kv_heads_(kv_heads_of(cfg)),
      head_dim_(cfg.head_dim),
      rope_base_(cfg.rope_base),
      q_w_(ps.add(prefix + ".q_proj.weight", {cfg.d_model, cfg.d_model}, init_normal(cfg.init_std),
                  /*weight_decay=*/true)),
      k_(ps, prefix + ".k_proj", cfg.d_model, kv_heads_ * cfg.head_dim, init_normal(cfg.init_std)),
      v_(ps, prefix + ".v_proj", cfg.d_model, kv_heads_ * cfg.head_dim, init_normal(cfg.init_std)),
      // Zero: every block starts as the identity, so the model starts as its backbone.
      o_w_(ps.add(prefix + ".o_proj.weight", {cfg.d_model, cfg.d_model}, init_constant(0.0),
                  /*weight_decay=*/true)) {}

Tensor AmorAttention::forward(const Tensor& hn, const Tensor& gate, bool sparse) {
  const char* op = "AmorAttention::forward";
  check_dim(op, "hn", hn, 3);
  const int64_t B = hn.size(0), T = hn.size(1), d = hn.size(2), BT = B * T;
  const int64_t H = heads_, Hkv = kv_heads_, D = head_dim_;
  check_dtype(op, "gate", gate, DType::U8);
  check_shape(op, "gate", gate, {B, T});
  sparse_ = sparse;
  gate_ = gate;
  rows_seen_ = Rows{};

  // The memory: keys and values at every token.
  kr_ = rope_forward(k_.forward(hn).view({B, T, Hkv, D}), 0, rope_base_);
  v4_ = v_.forward(hn).view({B, T, Hkv, D});
  rows_seen_.k = rows_seen_.v = BT;

  if (!sparse) {
    q_in_ = hn.view({BT, d});
    qr_ = rope_forward(row_stable_linear(q_in_, q_w_->value).view({B, T, H, D}), 0, rope_base_);
    AttentionOutput a = attention_forward(qr_, kr_, v4_, gate_);
    attn_o_ = a.o;
    lse_ = a.lse;
    o_in_ = a.o.view({BT, H * D});
    rows_seen_.q = rows_seen_.o = BT;
    return row_stable_linear(o_in_, o_w_->value).view({B, T, d});
  }

  rows_ = firing_rows(gate_);
  const int64_t n = static_cast<int64_t>(rows_.size());
  if (n == 0) return Tensor::zeros({B, T, d}, hn.dtype(), hn.device());
  positions_ = Tensor::empty({1, n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) positions_.data<int64_t>()[i] = rows_[static_cast<size_t>(i)] % T;
  q_in_ = gather_rows(hn.view({BT, d}), rows_);
  Tensor qc = rope_forward_positions(row_stable_linear(q_in_, q_w_->value).view({1, n, H, D}),
                                     positions_, rope_base_);
  qr_ = scatter_rows(qc.view({n, H * D}), rows_, BT).view({B, T, H, D});
  AttentionOutput a = attention_forward(qr_, kr_, v4_, gate_);  // reads firing rows of qr_ only
  attn_o_ = a.o;
  lse_ = a.lse;
  o_in_ = gather_rows(a.o.view({BT, H * D}), rows_);
  rows_seen_.q = rows_seen_.o = n;
  return scatter_rows(row_stable_linear(o_in_, o_w_->value), rows_, BT).view({B, T, d});
}

Tensor AmorAttention::backward(const Tensor& dy) {
  const char* op = "AmorAttention::backward";
  AMOR_CHECK(kr_.defined(), "{}: no saved forward (backward twice, or dropped)", op);
  const int64_t B = kr_.size(0), T = kr_.size(1), H = heads_, Hkv = kv_heads_, D = head_dim_;
  const int64_t BT = B * T, d = q_w_->value.size(1);
  check_shape(op, "dy", dy, {B, T, d});
  const bool none = sparse_ && rows_.empty();
  Tensor dx;
  if (none) {
    // Nothing fired: y was 0 whatever the weights, so no gradient reaches any projection.
    dx = Tensor::zeros({B, T, d}, dy.dtype(), dy.device());
    drop_saved();
    return dx;
  }
  const int64_t n = static_cast<int64_t>(rows_.size());

  Tensor dy_o = sparse_ ? gather_rows(dy.view({BT, d}), rows_) : dy.view({BT, d});
  LinearGrads og = linear_backward(o_in_, o_w_->value, dy_o);
  accumulate(o_w_, og.dw);
  Tensor dao = sparse_ ? scatter_rows(og.dx, rows_, BT) : og.dx;
  AttentionGrads g =
      attention_backward(qr_, kr_, v4_, gate_, attn_o_, lse_, dao.view({B, T, H, D}));

  if (sparse_) {
    Tensor dqc = rope_backward_positions(gather_rows(g.dq.view({BT, H * D}), rows_).view({1, n, H, D}),
                                         positions_, rope_base_);
    LinearGrads qg = linear_backward(q_in_, q_w_->value, dqc.view({n, H * D}));
    accumulate(q_w_, qg.dw);
    dx = scatter_rows(qg.dx, rows_, BT).view({B, T, d});
  } else {
    LinearGrads qg = linear_backward(q_in_, q_w_->value,
                                     rope_backward(g.dq, 0, rope_base_).view({BT, H * D}));
    accumulate(q_w_, qg.dw);
    dx = qg.dx.view({B, T, d});
  }
  add_(dx, k_.backward(rope_backward(g.dk, 0, rope_base_).view({B, T, Hkv * D})));
  add_(dx, v_.backward(g.dv.view({B, T, Hkv * D})));
  drop_saved();
  return dx;
}

bool AmorAttention::read_fused_qkv_step_switch() {
  return env_choice("AMOR_FUSED_QKV_STEP", {"0", "1"}, "1") == "1";
}

// Q's, K's and V's weights are [out, d] row-major, so stacking them is three copies of whole
// buffers into one.
const Tensor& AmorAttention::stacked_qkv_weight(const Tensor& like) {
  const Tensor* w[3] = {&q_w_->value, &k_.w->value, &v_.w->value};
  const Param* p[3] = {q_w_, k_.w, v_.w};
  std::array<std::pair<const void*, uint64_t>, 3> key;  // checked every decode step: no allocation
  for (int i = 0; i < 3; ++i) key[i] = {w[i]->raw_data(), p[i]->version};
  if (qkv_w_.defined() && key == qkv_w_key_ && qkv_w_.device() == like.device() &&
      qkv_w_.dtype() == w[0]->dtype())
    return qkv_w_;
  const int64_t d = w[0]->size(1);
  int64_t rows = 0;
  for (const Tensor* t : w) rows += t->size(0);
  qkv_w_ = Tensor::empty({rows, d}, w[0]->dtype(), like.device());
  int64_t at = 0;
  for (const Tensor* t : w) {
    qkv_w_.slice_flat(at, {t->numel()}).copy_from(t->view({t->numel()}));
    at += t->numel();
  }
  qkv_w_key_ = key;
  return qkv_w_;
}

Tensor AmorAttention::project_qkv(const Tensor& hn) {
  const int64_t B = hn.size(0), T = hn.size(1), d = hn.size(2), BT = B * T;
  const int64_t nq = heads_ * head_dim_, nkv = kv_heads_ * head_dim_, n = nq + 2 * nkv;
  const Tensor x = hn.view({BT, d});
  if (!hn.is_cpu()) return linear_forward(x, stacked_qkv_weight(hn)).view({B, T, n});
  // The cpu: the separate projections' values (the host path's bits), side by side.
  const Tensor parts[3] = {row_stable_linear(x, q_w_->value), k_.apply(x), v_.apply(x)};
  const int64_t width[3] = {nq, nkv, nkv};
  Tensor out = Tensor::empty({B, T, n}, hn.dtype(), hn.device());
  for (int64_t r = 0; r < BT; ++r) {
    int64_t at = r * n;
    for (int i = 0; i < 3; ++i) {
      out.slice_flat(at, {width[i]}).copy_from(parts[i].slice_flat(r * width[i], {width[i]}));
      at += width[i];
    }
  }
  return out;
}

Tensor AmorAttention::infer(const Tensor& hn, const Tensor& gate, KvCache& cache, bool sparse) {
  const char* op = "AmorAttention::infer";
  check_dim(op, "hn", hn, 3);
  const int64_t B = hn.size(0), T = hn.size(1), d = hn.size(2), BT = B * T;
  const int64_t H = heads_, Hkv = kv_heads_, D = head_dim_;
  check_dtype(op, "gate", gate, DType::U8);
  check_shape(op, "gate", gate, {B, T});
  rows_seen_ = Rows{};
  // Every row's Q (the dense form's) and K are rotated at the cache's next positions before the
  // append moves them (on the step path, T = 1 on the GPU, at the lengths on the device:
  // kv_cache.h); the sparse form's firing rows at those positions from the host.
  auto every_q = [&] {
    return row_stable_linear(hn.view({BT, d}), q_w_->value).view({B, T, H, D});
  };
  // Every row's Q and O (the dense form): at a decode step these projections read their weights
  // once whatever the row count, and the attention skips the gated-off rows itself, so the step
  // needs no read-back of the gate; with the KV cache's step path (lengths on the device) nothing
  // in the dense form's step changes its launches from step to step: a CUDA graph can capture it.
  auto every_row = [&](const Tensor& q) {
    Tensor o = cache.attend(q, gate);
    rows_seen_.q = rows_seen_.o = BT;
    return row_stable_linear(o.view({BT, H * D}), o_w_->value).view({B, T, d});
  };
  // The dense form on the step path: Q, K and V from one GEMM, their RoPE and the append in one
  // launch (amor_attention.h).
  static const bool fused = read_fused_qkv_step_switch();
  if (!sparse && fused && cache.step_path(T)) {
    const Tensor q = cache.append_qkv_step(project_qkv(hn), H, rope_base_);
    rows_seen_.k = rows_seen_.v = BT;
    return every_row(q);
  }
  const Tensor q_dense = sparse ? Tensor() : cache.rotate_next(every_q(), rope_base_);
  const NextPositions at = sparse ? cache.next_positions(T) : NextPositions();
  cache.append(cache.rotate_next(k_.apply(hn).view({B, T, Hkv, D}), rope_base_),
               v_.apply(hn).view({B, T, Hkv, D}));
  rows_seen_.k = rows_seen_.v = BT;
  if (!sparse) return every_row(q_dense);

  // The one read back to the host per block and step: which rows fire decides the shapes below.
  const std::vector<int64_t> rows = firing_rows(gate);
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) return Tensor();
  // Every row fires (at batch 1, any firing step): the sparse form's gathers and scatters would
  // copy all rows and its positions equal the cache's, so it is the dense form's work.
  if (n == BT) return every_row(rope_forward_at(every_q(), at, rope_base_));
  Tensor positions = Tensor::empty({1, n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) {  // row r is token r % T of sequence r / T
    const int64_t r = rows[static_cast<size_t>(i)];
    positions.data<int64_t>()[i] =
        at.per_sequence.defined() ? at.per_sequence.data<int64_t>()[r] : at.offset + r % T;
  }
  Tensor qc = rope_forward_positions(
      row_stable_linear(gather_rows(hn.view({BT, d}), rows), q_w_->value).view({1, n, H, D}),
      positions, rope_base_);
  Tensor qr = scatter_rows(qc.view({n, H * D}), rows, BT).view({B, T, H, D});
  // Only the sequences with a firing row attend (at decode, batch B and ~22% firing, most do not).
  std::vector<int64_t> sequences;
  for (int64_t r : rows)
    if (sequences.empty() || sequences.back() != r / T) sequences.push_back(r / T);
  Tensor o = cache.attend(qr, gate, &sequences);  // reads the firing rows of qr only
  rows_seen_.q = rows_seen_.o = n;
  return scatter_rows(row_stable_linear(gather_rows(o.view({BT, H * D}), rows), o_w_->value), rows, BT)
      .view({B, T, d});
}

void AmorAttention::drop_saved() {
  k_.drop_saved();
  v_.drop_saved();
  rows_.clear();
  positions_ = gate_ = q_in_ = o_in_ = qr_ = kr_ = v4_ = attn_o_ = lse_ = Tensor();
}

}  // namespace amor::model
