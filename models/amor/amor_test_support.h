// Shared by the AMOR tests: tiny configs, weights that give every path signal, and an EMA state
// that puts each block's threshold in a wide gap between its tokens' entropies, so the gates are
// mixed and no entropy sits near the threshold (finite differences then never flip a gate).
#pragma once
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "models/amor/amor_model.h"
#include "tests/common/random.h"

namespace amor::model::testing_amor {

inline ModelConfig tiny_amor(const std::string& residual_mode, int64_t blocks,
                             const std::string& offset_mode = "adaptive",
                             const std::string& backbone = "transformer") {
  ModelConfig c;
  c.kind = "amor";
  c.vocab = 13;
  c.d_model = 8;
  c.head_dim = 4;
  c.n_layers = 2;
  c.d_ff = 12;
  c.vocab_chunk = 5;  // several vocabulary chunks, the last one partial
  c.init_std = 0.5;   // large enough that the entropies spread and every path carries signal
  c.mamba2.head_dim = 4;  // d_inner 16 -> 4 heads
  c.mamba2.d_state = 4;
  c.mamba2.chunk = 4;     // T = 7 or 9: the last chunk is partial
  c.gdn.head_dim = 4;     // 0.5 * 8 / 4 -> 1 head of K = 4, V = 8
  c.gdn.qk_ratio = 0.5;
  c.gdn.chunk = 4;
  c.amor.backbone = backbone;
  c.amor.blocks = blocks;
  c.amor.residual_mode = residual_mode;
  c.amor.offset_mode = offset_mode;
  return c;
}

// After ParamStore::initialize: the AMOR blocks' O (zero at init) random, raw alphas spread
// around 0 with channel 0 below the clamp at -1, norms away from 1.
inline void perturb_amor_weights(ParamStore& ps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  auto ends_with = [](const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  for (auto& p : ps.params()) {
    Tensor& v = p->value;
    ++p->version;  // a write (param_store.h); the weights not rewritten below lose nothing by it
    if (p->name.rfind("amor.", 0) == 0 && ends_with(p->name, "o_proj.weight")) {
      for (int64_t i = 0; i < v.numel(); ++i) v.set_item(i, 0.5 * n(rng));
    } else if (ends_with(p->name, ".alpha")) {
      for (int64_t i = 0; i < v.numel(); ++i) v.set_item(i, n(rng));
      v.set_item(0, -1.5);
    } else if (ends_with(p->name, "norm.weight") || ends_with(p->name, "norm1.weight") ||
               ends_with(p->name, "norm2.weight") || p->name == "norm_f.weight") {
      for (int64_t i = 0; i < v.numel(); ++i) v.set_item(i, 1.0 + 0.2 * n(rng));
    }
  }
}

inline Batch tiny_batch(const ModelConfig& cfg, int64_t B, int64_t T, uint64_t seed) {
  Batch b{testing::randint({B, T}, seed, cfg.vocab), testing::randint({B, T}, seed + 1, cfg.vocab)};
  b.targets.data<int32_t>()[3] = -100;  // an ignored position
  return b;
}

struct Calibrated {
  std::vector<AmorGateState> state;  // set this before the forward
  double margin = 0;                 // min over blocks and tokens of |H - tau|
};

// Chooses, block by block, the EMA state whose threshold (after the training update, when
// training) is the middle of the widest gap between the middle half of the block's sorted
// entropies. tau is affine in m with slope momentum (training) or 1, so one probe forward with
// m = 0 per block finds it.
inline Calibrated calibrate_gates(AmorModel& model, const Batch& batch, bool training) {
  const ModelConfig& cfg = model.config();
  Calibrated c;
  c.state = model.gate_state();
  const double slope = training ? cfg.amor.momentum : 1.0;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    c.state[i].m = 0;
    model.set_gate_state(c.state);
    StepOutput probe = model.forward(batch, training);
    std::vector<double> H = probe.gate_entropy[i].to_vector<double>();
    std::sort(H.begin(), H.end());
    size_t lo = H.size() / 4, hi = 3 * H.size() / 4, best = lo;
    for (size_t j = lo; j < hi; ++j)
      if (H[j + 1] - H[j] > H[best + 1] - H[best]) best = j;
    double target = 0.5 * (H[best] + H[best + 1]);
    c.state[i].m = (target - probe.tau[i]) / slope;
  }
  model.set_gate_state(c.state);
  StepOutput out = model.forward(batch, training);
  c.margin = 1e300;
  for (int64_t i = 0; i < model.num_blocks(); ++i)
    for (double h : out.gate_entropy[i].to_vector<double>())
      c.margin = std::min(c.margin, std::abs(h - out.tau[i]));
  model.set_gate_state(c.state);
  return c;
}

}  // namespace amor::model::testing_amor
