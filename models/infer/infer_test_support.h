// Shared by the inference tests: tiny models of every kind with weights that give every path
// signal, a decode driven through InferenceSession, and time-axis helpers.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "models/amor/amor_model.h"
#include "models/amor/amor_test_support.h"
#include "models/infer/inference_session.h"
#include "models/infer/kv_cache.h"
#include "models/oryx/oryx_modes.h"
#include "tests/common/random.h"
#include "tests/common/tiny_models.h"

namespace amor::model::testing_infer {

// The KV caches' step path switched on the GPU for a scope (KvCache::use_step_path_on_gpu), the
// previous setting restored after.
struct StepPathOnGpu {
  bool was;
  explicit StepPathOnGpu(bool on) : was(KvCache::step_path_on_gpu()) { KvCache::use_step_path_on_gpu(on); }
  ~StepPathOnGpu() { KvCache::use_step_path_on_gpu(was); }
  StepPathOnGpu(const StepPathOnGpu&) = delete;
  StepPathOnGpu& operator=(const StepPathOnGpu&) = delete;
};

struct KindCase {
  std::string name;
  ModelConfig cfg;
};

inline ModelConfig tiny(const std::string& kind) {
  ModelConfig c = amor::testing::tiny_model(kind, /*d_model=*/8, /*n_layers=*/2, /*vocab=*/23);
  c.init_std = 0.5;    // spread-out predictions: entropies and argmaxes far from ties
  c.vocab_chunk = 10;  // several vocabulary chunks, the last partial
  return c;
}

inline ModelConfig tiny_oryx(const std::string& linear, const std::string& schedule) {
  ModelConfig c = tiny("oryx");
  c.oryx.linear = linear;
  c.oryx.schedule = schedule;
  return c;
}

inline ModelConfig tiny_amor(const std::string& backbone, int64_t blocks,
                             const std::string& residual = "classic") {
  ModelConfig c = testing_amor::tiny_amor(residual, blocks, "adaptive", backbone);
  c.vocab = 23;
  c.vocab_chunk = 10;
  return c;
}

// Every model kind, with each Oryx schedule (segment lists switching both ways).
inline std::vector<KindCase> all_kinds() {
  std::vector<KindCase> k;
  k.push_back({"transformer", tiny("transformer")});
  ModelConfig gqa = tiny("transformer");
  gqa.n_kv_heads = 1;
  k.push_back({"transformer_gqa", gqa});
  k.push_back({"mamba2", tiny("mamba2")});
  k.push_back({"gdn", tiny("gdn")});
  for (const char* p : {"MA", "GA"}) {
    ModelConfig s = tiny("serial");
    s.pattern = p;
    k.push_back({std::string("serial_") + p, s});
  }
  for (const char* l : {"mamba2", "gdn"}) {
    ModelConfig f = tiny("fused");
    f.fused_linear = l;
    k.push_back({std::string("fused_") + l, f});
  }
  for (const char* b : {"gdn", "mamba2"})
    for (int64_t blocks : {1, 3}) k.push_back({"amor_" + std::string(b) + "_K" + std::to_string(blocks), tiny_amor(b, blocks)});
  k.push_back({"amor_gdn_K3_residual_h", tiny_amor("gdn", 3, "h")});
  for (const char* s : {"attention", "linear", "prefill_linear_decode_attention",
                        "attention:3,linear:4", "linear:2,attention:3,linear:*"})
    k.push_back({std::string("oryx_gdn_") + s, tiny_oryx("gdn", s)});
  for (const char* s : {"prefill_linear_decode_attention", "attention:3,linear:4"})
    k.push_back({std::string("oryx_mamba2_") + s, tiny_oryx("mamba2", s)});
  return k;
}

inline std::unique_ptr<LanguageModel> make_model(const ModelConfig& cfg, DType dtype, uint64_t seed) {
  std::unique_ptr<LanguageModel> m = build_model(cfg, dtype);
  m->params().initialize(seed);
  if (cfg.kind == "amor") testing_amor::perturb_amor_weights(m->params(), seed + 1);
  return m;
}

// testing_amor::calibrate_gates for any float dtype (outside training): each block's threshold
// in the widest gap of the middle half of its sorted entropies. Returns the smallest |H - tau|.
inline double calibrate_eval_gates(AmorModel& model, const Batch& batch) {
  std::vector<AmorGateState> state = model.gate_state();
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    state[i].m = 0;
    model.set_gate_state(state);
    StepOutput probe = model.forward(batch, /*training=*/false);
    std::vector<double> H;
    const Tensor Hi = probe.gate_entropy[i].to(Device::CPU);  // the model may sit on the GPU
    for (int64_t j = 0; j < Hi.numel(); ++j) H.push_back(Hi.item(j));
    std::sort(H.begin(), H.end());
    size_t lo = H.size() / 4, hi = 3 * H.size() / 4, best = lo;
    for (size_t j = lo; j < hi; ++j)
      if (H[j + 1] - H[j] > H[best + 1] - H[best]) best = j;
    state[i].m = 0.5 * (H[best] + H[best + 1]) - probe.tau[i];  // tau = m + offset
  }
  model.set_gate_state(state);
  StepOutput out = model.forward(batch, false);
  double margin = 1e300;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    const Tensor Hi = out.gate_entropy[i].to(Device::CPU);
    for (int64_t j = 0; j < Hi.numel(); ++j) margin = std::min(margin, std::abs(Hi.item(j) - out.tau[i]));
  }
  return margin;
}

using model::columns;  // inference_session.h

// [B,T1], [B,T2], ... -> [B, T1 + T2 + ...] (cpu).
inline Tensor concat_time(const std::vector<Tensor>& parts) {
  const int64_t B = parts.at(0).size(0);
  int64_t T = 0;
  for (const Tensor& p : parts) T += p.size(1);
  Tensor y = Tensor::empty({B, T}, parts[0].dtype());
  int64_t t0 = 0;
  for (const Tensor& p : parts) {
    const int64_t n = p.size(1);
    for (int64_t b = 0; b < B; ++b) y.slice_flat(b * T + t0, {n}).copy_from(p.slice_flat(b * n, {n}));
    t0 += n;
  }
  return y;
}

struct Decoded {
  StepOutput out;  // the per-token records of all T positions, as forward() gives them
  // AMOR: per block, the Q and O rows computed by the decode steps and the gates fired there.
  std::vector<int64_t> step_q_rows, step_o_rows, step_fired;
};

// Prefills the first chunks (e.g. {3, 4}: two prefill calls), then decodes the rest step by step.
inline Decoded decode(LanguageModel& model, const Batch& batch, const std::vector<int64_t>& chunks) {
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  InferenceSession session(model, B);
  std::vector<StepOutput> parts;
  int64_t t = 0;
  for (int64_t c : chunks) {
    parts.push_back(session.prefill(columns(batch.tokens, t, c), columns(batch.targets, t, c)));
    t += c;
  }
  auto* amor = dynamic_cast<AmorModel*>(&model);
  const size_t K = amor ? static_cast<size_t>(amor->num_blocks()) : 0;
  Decoded d;
  d.step_q_rows.assign(K, 0);
  d.step_o_rows.assign(K, 0);
  d.step_fired.assign(K, 0);
  for (; t < T; ++t) {
    parts.push_back(session.step(columns(batch.tokens, t, 1).view({B}), columns(batch.targets, t, 1).view({B})));
    for (size_t k = 0; k < K; ++k) {
      d.step_q_rows[k] += amor->block(static_cast<int64_t>(k)).last_projection_rows().q;
      d.step_o_rows[k] += amor->block(static_cast<int64_t>(k)).last_projection_rows().o;
      for (uint8_t g : parts.back().gates[k].to(Device::CPU).to_vector<uint8_t>()) d.step_fired[k] += g;
    }
  }
  EXPECT_EQ(session.length(), T);
  auto gather_field = [&](auto field) {
    std::vector<Tensor> v;
    for (const StepOutput& p : parts) v.push_back(field(p).to(Device::CPU));
    return concat_time(v);
  };
  d.out.token_loss = gather_field([](const StepOutput& p) { return p.token_loss; });
  d.out.entropy = gather_field([](const StepOutput& p) { return p.entropy; });
  d.out.predictions = gather_field([](const StepOutput& p) { return p.predictions; });
  if (parts[0].modes.defined()) d.out.modes = gather_field([](const StepOutput& p) { return p.modes; });
  for (size_t k = 0; k < parts[0].gates.size(); ++k) {
    d.out.gates.push_back(gather_field([k](const StepOutput& p) { return p.gates[k]; }));
    d.out.gate_entropy.push_back(gather_field([k](const StepOutput& p) { return p.gate_entropy[k]; }));
    d.out.tau.push_back(parts[0].tau[k]);
  }
  for (const StepOutput& p : parts) {
    d.out.loss_sum += p.loss_sum;
    d.out.n_valid += p.n_valid;
  }
  return d;
}

// max |a - b| / max(1, |b|) over all entries.
inline double max_rel_diff(const Tensor& a_any, const Tensor& b_any) {
  const Tensor a = a_any.to(Device::CPU), b = b_any.to(Device::CPU);
  EXPECT_EQ(a.shape(), b.shape());
  double m = 0;
  for (int64_t i = 0; i < b.numel(); ++i)
    m = std::max(m, std::abs(a.item(i) - b.item(i)) / std::max(1.0, std::abs(b.item(i))));
  return m;
}

// The number of entries where two equally shaped tensors differ.
inline int64_t mismatches(const Tensor& a_any, const Tensor& b_any) {
  const Tensor a = a_any.to(Device::CPU), b = b_any.to(Device::CPU);
  EXPECT_EQ(a.shape(), b.shape());
  int64_t n = 0;
  for (int64_t i = 0; i < b.numel(); ++i) n += a.item(i) != b.item(i);
  return n;
}

}  // namespace amor::model::testing_infer
