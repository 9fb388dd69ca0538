#include "models/amor/amor_block.h"

#include <cmath>
#include <cstring>

#include "kernels/core/env_switch.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/lm_head_loss/lm_head_loss.h"

namespace amor::model {

namespace {

constexpr double kAlphaFloor = -1.0;  // raw alpha is clamped below here: alpha >= sigmoid(-1)

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// AMOR_BLOCK_INFERENCE=sparse|dense (unset or empty: sparse): the attention's form outside
// training (amor_attention.h), read when a block is built; set_sparse_inference overrides it.
bool sparse_inference_from_env() {
  return env_choice("AMOR_BLOCK_INFERENCE", {"sparse", "dense"}, "sparse") == "sparse";
}

}  // namespace

AmorBlock::AmorBlock(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg)
    : vocab_chunk_(cfg.vocab_chunk),
      recompute_(cfg.recompute),
      sparse_inference_(sparse_inference_from_env()),
      gate_(cfg.amor),
      attn_(ps, prefix + ".attn", cfg) {
  raw_alpha = ps.add(prefix + ".alpha", {cfg.d_model}, init_constant(0.0), /*weight_decay=*/false);
}

// alpha is a [d] vector: its clamp and sigmoid are computed on the host and moved to hn's device.
Tensor AmorBlock::forward(const Tensor& hn, const Tensor& W, bool training) {
  entropy_ = gate_entropy(hn, W, training);
  GateDecision g = gate_.decide(entropy_, training);
  gate_t_ = g.gate;
  gate_state_ = g.state;

  sparse_ = !training && sparse_inference_;
  y_ = attn_.forward(hn, gate_t_, sparse_);

  alpha_ = alpha_vector(hn);
  Tensor delta = channel_scale_forward(y_, alpha_);
  if (recompute_) {
    hn_ = hn;
    attn_.drop_saved();
    y_ = Tensor();
  }
  return delta;
}

Tensor AmorBlock::gate_entropy(const Tensor& hn, const Tensor& W, bool training,
                               bool inference) const {
  const int64_t B = hn.size(0), T = hn.size(1), d = hn.size(2);
  if (router_ && !training) return router_->predict(router_index_, hn);  // [B,T], hn's dtype
  // infer(): a decode step's few rows in one pass over the vocabulary (inference_vocab_chunk).
  const int64_t chunk = inference ? inference_vocab_chunk(B * T, W.size(0), vocab_chunk_) : vocab_chunk_;
  return lm_head_entropy(hn.view({B * T, d}), W, chunk).view({B, T});
}

double AmorBlock::last_tau() const {
  AMOR_CHECK(gate_state_.defined(), "AmorBlock::last_tau: no forward yet");
  return gate_state_.to(Device::CPU).item(ref::kGateTau);
}

Tensor AmorBlock::alpha_vector(const Tensor& like) const {
  Tensor raw = raw_alpha->value.to(Device::CPU);
  Tensor a = Tensor::empty({raw.numel()}, raw.dtype());
  for (int64_t c = 0; c < raw.numel(); ++c) a.set_item(c, sigmoid(std::max(raw.item(c), kAlphaFloor)));
  return a.to(like.device());
}

// alpha_vector reads raw_alpha back to the host, computes there and uploads: on the GPU a copy
// each way and a wait for the stream, per block per decode step. The parameter does not change
// between decode steps, so inference keeps the result and recomputes it (the same host formula,
// so the same bits) only when raw_alpha's storage or version (param_store.h: every write of a
// parameter increments it) or the device differs from the last call's. On the cpu the values it
// came from are kept too and compared (no copy back there): a write that skipped the version is
// reported as the bug it is instead of decoding with a stale alpha; every CPU test checks this.
const Tensor& AmorBlock::inference_alpha(const Tensor& like) {
  const Tensor& raw = raw_alpha->value;
  const AlphaKey key{raw.raw_data(), raw_alpha->version, raw.dtype(), like.device()};
  if (infer_alpha_.defined() && key == infer_alpha_key_) {
    AMOR_CHECK(!raw.is_cpu() ||
                   std::memcmp(raw.raw_data(), infer_alpha_raw_.raw_data(), raw.nbytes()) == 0,
               "AmorBlock::infer: {} changed without its Param::version being incremented (a "
               "write of a parameter must increment it: param_store.h)",
               raw_alpha->name);
    return infer_alpha_;
  }
  infer_alpha_ = alpha_vector(like);
  infer_alpha_key_ = key;
  infer_alpha_raw_ = raw.is_cpu() ? raw.clone() : Tensor();
  return infer_alpha_;
}

AmorBlock::InferOut AmorBlock::infer(const Tensor& hn, const Tensor& W, KvCache& cache, const Tensor& h) {
  InferOut r;
  r.entropy = gate_entropy(hn, W, /*training=*/false, /*inference=*/true);
  GateDecision g = gate_.decide(r.entropy, /*training=*/false);  // frozen: no EMA update
  r.gate = g.gate;
  r.tau = gate_.tau();  // frozen: a host copy the gate keeps, read back once after training
  // Nothing fired: y is 0, so delta would be alpha * 0 = +0 everywhere, and h + (+0) is h (bit for
  // bit, except that the add would turn a -0 entry into +0, an equal value): no launch then.
  Tensor y = attn_.infer(hn, r.gate, cache, sparse_inference_);
  r.h = y.defined() ? channel_scale_add(h, y, inference_alpha(hn)) : h;
  return r;
}

Tensor AmorBlock::backward(const Tensor& ddelta) {
  if (recompute_) {
    AMOR_CHECK(hn_.defined(), "AmorBlock::backward: no forward to recompute (backward twice?)");
    y_ = attn_.forward(hn_, gate_t_, sparse_);  // the same gate: no second EMA update
    hn_ = Tensor();
  }
  ChannelScaleGrads g = channel_scale_backward(y_, alpha_, ddelta);
  Tensor raw = raw_alpha->value.to(Device::CPU);
  Tensor a = alpha_.to(Device::CPU), dalpha = g.ds.to(Device::CPU);
  Tensor draw = Tensor::empty(raw.shape(), raw.dtype());
  for (int64_t c = 0; c < raw.numel(); ++c) {
    double s = a.item(c);
    draw.set_item(c, raw.item(c) >= kAlphaFloor ? dalpha.item(c) * s * (1 - s) : 0.0);
  }
  accumulate(raw_alpha, draw.to(raw_alpha->grad.device()));
  Tensor dhn = attn_.backward(g.dx);
  y_ = alpha_ = Tensor();
  return dhn;
}

}  // namespace amor::model
