// Activation recomputation (model.recompute): every model kind computes bitwise the same losses,
// AMOR gates/thresholds and parameter gradients with it on as with it off, in double and float,
// in training and at inference, over two steps (the second starting from the first's state:
// AMOR's EMA thresholds, Oryx's sample-seeded modes); and with it on, the CPU allocator's peak
// of live bytes during forward + backward is well below the peak without it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "kernels/core/caching_allocator.h"
#include "models/amor/amor_test_support.h"
#include "models/lm/language_model.h"
#include "tests/common/random.h"
#include "tests/common/tiny_models.h"

namespace amor::model {
namespace {

ModelConfig tiny(const std::string& kind) {
  ModelConfig c = testing::tiny_model(kind, /*d_model=*/16, /*n_layers=*/3, /*vocab=*/13);
  c.vocab_chunk = 5;
  c.init_std = 0.5;
  c.oryx.chunk = 3;  // several training chunks per sequence: mixed modes
  c.oryx.schedule = "linear:4,attention:3";
  return c;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Model with recompute off vs on, same weights (and same AMOR gate state), two steps each of
// forward + backward; everything compared bitwise.
void check_same(ModelConfig cfg, DType dtype, bool training, const std::string& label) {
  SCOPED_TRACE(label + (dtype == DType::F64 ? " f64" : " f32") + (training ? " train" : " eval"));
  cfg.recompute = false;
  auto off = build_model(cfg, dtype);
  cfg.recompute = true;
  auto on = build_model(cfg, dtype);
  off->params().initialize(3);
  if (cfg.kind == "amor") testing_amor::perturb_amor_weights(off->params(), 4);
  for (auto& p : on->params().params()) p->value.copy_from(off->params().find(p->name)->value);
  // (f32 and f64 models initialise from one seed identically up to rounding; the probe below
  // only needs the same gate pattern, not bitwise weights.)

  const int64_t B = 2, T = 9;
  Batch batch{testing::randint({B, T}, 5, cfg.vocab), testing::randint({B, T}, 6, cfg.vocab),
              Tensor::from_vector<int64_t>({B}, {11, 12})};
  batch.targets.data<int32_t>()[4] = -100;
  if (cfg.kind == "amor") {  // thresholds inside the entropies, so some tokens fire and some not
    AmorModel probe(cfg, DType::F64);  // calibrated in double, the same weights
    probe.params().initialize(3);
    testing_amor::perturb_amor_weights(probe.params(), 4);
    auto cal = testing_amor::calibrate_gates(probe, batch, training);
    dynamic_cast<AmorModel&>(*off).set_gate_state(cal.state);
    dynamic_cast<AmorModel&>(*on).set_gate_state(cal.state);
  }
  for (int step = 0; step < 2; ++step) {
    Tensor w = testing::randn({B, T}, 7 + step, dtype);
    off->params().zero_grad();
    on->params().zero_grad();
    StepOutput a = off->forward(batch, training), b = on->forward(batch, training);
    off->backward(w);
    on->backward(w);
    EXPECT_TRUE(bitwise_equal(a.token_loss, b.token_loss)) << "step " << step;
    ASSERT_EQ(a.gates.size(), b.gates.size());
    for (size_t i = 0; i < a.gates.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(a.gates[i], b.gates[i])) << "block " << i;
      EXPECT_EQ(a.tau[i], b.tau[i]) << "block " << i;
      int64_t fired = 0;
      for (uint8_t g : a.gates[i].to_vector<uint8_t>()) fired += g;
      if (step == 0) {  // the calibrated thresholds split the tokens (step 1 moves them)
        EXPECT_GT(fired, 0) << "block " << i;
        EXPECT_LT(fired, a.gates[i].numel()) << "block " << i;
      }
    }
    if (a.modes.defined()) EXPECT_TRUE(bitwise_equal(a.modes, b.modes));
    int64_t nonzero = 0;
    for (auto& p : off->params().params()) {
      const Tensor& g = on->params().find(p->name)->grad;
      EXPECT_TRUE(bitwise_equal(p->grad, g)) << p->name << " step " << step;
      for (int64_t i = 0; i < g.numel(); ++i) nonzero += g.item(i) != 0.0;
    }
    EXPECT_GT(nonzero, 0);
  }
}

std::vector<std::pair<std::string, ModelConfig>> every_kind() {
  std::vector<std::pair<std::string, ModelConfig>> v;
  for (const char* k : {"transformer", "mamba2", "gdn"}) v.emplace_back(k, tiny(k));
  ModelConfig c = tiny("serial");
  c.pattern = "MGA";
  v.emplace_back("serial MGA", c);
  for (const char* lin : {"mamba2", "gdn"}) {
    c = tiny("fused");
    c.fused_linear = lin;
    v.emplace_back(std::string("fused ") + lin, c);
    c = tiny("oryx");
    c.oryx.linear = lin;
    v.emplace_back(std::string("oryx ") + lin, c);
  }
  for (const char* mode : {"classic", "h"})
    for (const char* backbone : {"gdn", "mamba2"}) {
      c = tiny("amor");
      c.amor.residual_mode = mode;
      c.amor.backbone = backbone;
      c.amor.blocks = 3;
      v.emplace_back(std::string("amor ") + mode + " " + backbone, c);
    }
  c = tiny("amor");
  c.amor.blocks = 1;
  c.n_kv_heads = 2;  // GQA blocks
  v.emplace_back("amor K=1 gqa", c);
  return v;
}

TEST(Recompute, EveryKindBitwiseSameLossesAndGradientsDouble) {
  for (auto& [label, cfg] : every_kind()) {
    check_same(cfg, DType::F64, /*training=*/true, label);
    check_same(cfg, DType::F64, /*training=*/false, label);
  }
}

TEST(Recompute, EveryKindBitwiseSameLossesAndGradientsFloat) {
  for (auto& [label, cfg] : every_kind()) {
    check_same(cfg, DType::F32, /*training=*/true, label);
    check_same(cfg, DType::F32, /*training=*/false, label);
  }
}

struct Peak {
  size_t peak = 0;        // above the bytes live before the forward
  size_t after_fwd = 0;   // live after the forward, above the same base
};

Peak measure(ModelConfig cfg, bool recompute) {
  cfg.recompute = recompute;
  auto model = build_model(cfg, DType::F32);
  model->params().initialize(1);
  const int64_t B = 2, T = 64;
  Batch batch{testing::randint({B, T}, 2, cfg.vocab), testing::randint({B, T}, 3, cfg.vocab)};
  Tensor w = testing::randn({B, T}, 4, DType::F32);
  CachingAllocator& alloc = allocator(Device::CPU);
  const size_t base = alloc.stats().bytes_in_use;
  alloc.reset_peak();
  model->forward(batch, /*training=*/true);
  Peak p;
  p.after_fwd = alloc.stats().bytes_in_use - base;
  model->backward(w);
  p.peak = alloc.stats().peak_bytes_in_use - base;
  return p;
}

TEST(Recompute, PeakActivationMemoryIsLower) {
  std::vector<std::pair<std::string, ModelConfig>> cases;
  ModelConfig c;
  c.vocab = 512;
  c.d_model = 128;
  c.head_dim = 64;
  c.n_layers = 6;
  c.d_ff = 384;
  c.mamba2.d_state = 32;
  for (const char* kind : {"transformer", "mamba2", "gdn"}) {
    c.kind = kind;
    cases.emplace_back(kind, c);
  }
  c.kind = "amor";
  c.amor.backbone = "gdn";
  cases.emplace_back("amor gdn", c);
  for (auto& [label, cfg] : cases) {
    Peak off = measure(cfg, false), on = measure(cfg, true);
    std::printf("%-12s peak above params: off %7.2f MiB, on %7.2f MiB (%.2fx); held after forward: "
                "off %6.2f MiB, on %6.2f MiB\n",
                label.c_str(), off.peak / 1048576.0, on.peak / 1048576.0,
                double(on.peak) / double(off.peak), off.after_fwd / 1048576.0,
                on.after_fwd / 1048576.0);
    EXPECT_LT(double(on.peak), 0.7 * double(off.peak)) << label;
    EXPECT_LT(double(on.after_fwd), 0.5 * double(off.after_fwd)) << label;
  }
}

}  // namespace
}  // namespace amor::model
