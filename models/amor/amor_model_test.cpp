// The AMOR model in double on tiny configs (transformer backbone until the GDN/Mamba2 mixers are
// wired into make_mixer):
//  - every parameter's gradient against central differences, with the gates fixed: the EMA state
//    is restored before each forward and chosen so no entropy lies near its threshold, and every
//    forward of the check must reproduce the base gate pattern (the gate is a step function of the
//    weights; the check is of the model with those gates, and shows no gradient flows through
//    the gate's entropy);
//  - at init (O = 0) the losses, entropies and backbone gradients equal those of the backbone
//    followed by the same norms, exactly;
//  - gated-off tokens get exactly zero attention (block output = hn);
//  - thresholds move once per training forward, before gating, by the EMA rule on that batch's
//    entropies, and never outside training; the gather hook makes 2 ranks equal 1;
//  - both residual modes, K = 1 and 3, the fixed offset mode; bad keys are named in errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/amor/amor_test_support.h"
#include "models/core/norm_eps.h"
#include "tests/common/gradcheck.h"

namespace amor::model {
namespace {

using namespace testing_amor;

void expect_mixed_gates(const StepOutput& out) {
  for (size_t i = 0; i < out.gates.size(); ++i) {
    int64_t fired = 0;
    for (uint8_t g : out.gates[i].to_vector<uint8_t>()) fired += g;
    EXPECT_GT(fired, 0) << "block " << i;
    EXPECT_LT(fired, out.gates[i].numel()) << "block " << i;
  }
}

bool same_gates(const StepOutput& a, const StepOutput& b) {
  for (size_t i = 0; i < a.gates.size(); ++i)
    if (a.gates[i].to_vector<uint8_t>() != b.gates[i].to_vector<uint8_t>()) return false;
  return true;
}

void check_gradients(const ModelConfig& cfg, bool training, uint64_t seed) {
  AmorModel model(cfg, DType::F64);
  model.params().initialize(seed);
  perturb_amor_weights(model.params(), seed + 1);
  Batch batch = tiny_batch(cfg, 2, 7, seed + 2);
  Calibrated cal = calibrate_gates(model, batch, training);
  ASSERT_GT(cal.margin, 1e-4) << "an entropy sits at its threshold; pick another seed";

  Tensor w = testing::randn({2, 7}, seed + 3);
  model.params().zero_grad();
  StepOutput base = model.forward(batch, training);
  expect_mixed_gates(base);
  model.backward(w);
  std::vector<testing::GradInput> inputs;
  for (auto& p : model.params().params()) inputs.push_back({p->name, p->value, p->grad.clone()});
  int flips = 0;
  testing::gradcheck(
      [&] {
        model.set_gate_state(cal.state);
        StepOutput o = model.forward(batch, training);
        if (!same_gates(o, base)) ++flips;
        return std::vector<Tensor>{o.token_loss};
      },
      {w}, inputs);
  EXPECT_EQ(flips, 0) << "a perturbation flipped a gate";
}

TEST(AmorGradcheck, ClassicThreeBlocksTraining) { check_gradients(tiny_amor("classic", 3), true, 10); }
TEST(AmorGradcheck, HModeThreeBlocksTraining) { check_gradients(tiny_amor("h", 3), true, 20); }
TEST(AmorGradcheck, ClassicOneBlockFixedOffset) {
  check_gradients(tiny_amor("classic", 1, "fixed"), true, 30);
}
TEST(AmorGradcheck, GdnBackboneClassicThreeBlocks) {
  check_gradients(tiny_amor("classic", 3, "adaptive", "gdn"), true, 50);
}
TEST(AmorGradcheck, Mamba2BackboneHModeThreeBlocks) {
  check_gradients(tiny_amor("h", 3, "adaptive", "mamba2"), true, 60);
}
TEST(AmorGradcheck, HModeOneBlockEvalGqa) {
  ModelConfig c = tiny_amor("h", 1);
  c.n_kv_heads = 1;
  check_gradients(c, false, 40);
}

// The backbone followed by the AMOR model's norms and nothing else: what AMOR is at step 0.
class BackboneOnly final : public LanguageModel {
 public:
  explicit BackboneOnly(const ModelConfig& cfg) : LanguageModel(cfg, DType::F64) {
    for (int64_t i = 0; i < cfg.n_layers; ++i) {
      std::string prefix = "layers." + std::to_string(i);
      layers_.push_back(std::make_unique<Layer>(params_, prefix, cfg,
                                                make_mixer(amor_backbone_letter(cfg), params_, prefix + ".mixer", cfg)));
    }
    if (cfg.amor.residual_mode == "classic")
      norm_f_ = std::make_unique<RMSNorm>(params_, "norm_f", cfg.d_model, norm_eps_of(cfg).norm_f);
    final_norm_ = std::make_unique<RMSNorm>(params_, "final_norm", cfg.d_model, norm_eps_of(cfg).amor);
  }

 protected:
  Tensor body_forward(const Tensor& h0, const Batch&, bool, StepOutput&) override {
    Tensor h = h0;
    for (auto& l : layers_) h = l->forward(h, MixerContext{});
    if (norm_f_) h = norm_f_->forward(h);
    return final_norm_->forward(h);
  }
  Tensor body_backward(const Tensor& dy) override {
    Tensor dh = final_norm_->backward(dy);
    if (norm_f_) dh = norm_f_->backward(dh);
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dh = (*it)->backward(dh);
    return dh;
  }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<RMSNorm> norm_f_, final_norm_;
};

void check_equals_backbone_at_init(const std::string& mode, const std::string& backbone_kind) {
  ModelConfig cfg = tiny_amor(mode, 3, "adaptive", backbone_kind);
  AmorModel amor(cfg, DType::F64);
  amor.params().initialize(5);
  BackboneOnly backbone(cfg);
  for (auto& p : backbone.params().params()) p->value.copy_from(amor.params().find(p->name)->value);
  Batch batch = tiny_batch(cfg, 2, 7, 6);
  Tensor w = testing::randn({2, 7}, 7);
  amor.params().zero_grad();
  backbone.params().zero_grad();
  StepOutput a = amor.forward(batch, true), b = backbone.forward(batch, true);
  amor.backward(w);
  backbone.backward(w);
  EXPECT_EQ(testing::max_abs_diff(a.token_loss, b.token_loss), 0.0);
  EXPECT_EQ(testing::max_abs_diff(a.entropy, b.entropy), 0.0);
  for (auto& p : backbone.params().params())
    EXPECT_EQ(testing::max_abs_diff(amor.params().find(p->name)->grad, p->grad), 0.0)
        << backbone_kind << " " << p->name;
  // The zero O still learns: its gradient is not zero where a gate fired.
  double og = 0;
  for (double x : amor.params().find("amor.0.attn.o_proj.weight")->grad.to_vector<double>())
    og += std::abs(x);
  int64_t fired = 0;
  for (uint8_t g : a.gates[0].to_vector<uint8_t>()) fired += g;
  if (fired > 0) {
    EXPECT_GT(og, 0);
  }
}

TEST(AmorModel, EqualsItsBackboneAtInit) {
  check_equals_backbone_at_init("classic", "transformer");
  check_equals_backbone_at_init("h", "transformer");
  check_equals_backbone_at_init("classic", "gdn");
  check_equals_backbone_at_init("h", "mamba2");
}

TEST(AmorModel, GatedOffTokensGetNoAttention) {
  ModelConfig cfg = tiny_amor("classic", 3);
  AmorModel model(cfg, DType::F64);
  model.params().initialize(11);
  perturb_amor_weights(model.params(), 12);
  Batch batch = tiny_batch(cfg, 2, 7, 13);
  calibrate_gates(model, batch, true);
  StepOutput out = model.forward(batch, true);
  expect_mixed_gates(out);
  const int64_t d = cfg.d_model;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    std::vector<uint8_t> g = out.gates[i].to_vector<uint8_t>();
    std::vector<double> y = model.block(i).last_attention().to_vector<double>();
    for (size_t t = 0; t < g.size(); ++t) {
      double mx = 0;
      for (int64_t c = 0; c < d; ++c) mx = std::max(mx, std::abs(y[t * d + c]));
      if (g[t])
        EXPECT_GT(mx, 0) << "block " << i << " token " << t;
      else
        EXPECT_EQ(mx, 0.0) << "block " << i << " token " << t;  // out = hn exactly
    }
  }
}

double expected_tau(const AmorConfig& c, AmorGateState& s, const Tensor& H, bool training) {
  if (training) {
    EntropyStats st = entropy_stats(H);
    s.m = c.momentum * s.m + (1 - c.momentum) * st.median;
    if (c.offset_mode == "adaptive") s.s = c.momentum * s.s + (1 - c.momentum) * st.std;
  }
  return c.offset_mode == "adaptive" ? s.m + c.kappa * s.s : s.m + c.fixed_offset;
}

void check_thresholds(const ModelConfig& cfg) {
  AmorModel model(cfg, DType::F64);
  model.params().initialize(21);
  perturb_amor_weights(model.params(), 22);
  Batch batch = tiny_batch(cfg, 2, 7, 23);
  std::vector<AmorGateState> expect = model.gate_state();
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    EXPECT_EQ(expect[i].m, cfg.amor.m_init);
    EXPECT_EQ(expect[i].s, cfg.amor.s_init);
  }
  for (bool training : {true, true, false, true}) {
    StepOutput out = model.forward(batch, training);
    for (int64_t i = 0; i < model.num_blocks(); ++i) {
      double tau = expected_tau(cfg.amor, expect[i], out.gate_entropy[i], training);
      EXPECT_DOUBLE_EQ(out.tau[i], tau);
      std::vector<double> H = out.gate_entropy[i].to_vector<double>();
      std::vector<uint8_t> g = out.gates[i].to_vector<uint8_t>();
      for (size_t t = 0; t < H.size(); ++t) EXPECT_EQ(g[t], H[t] > tau ? 1 : 0);
      EXPECT_DOUBLE_EQ(model.gate_state()[i].m, expect[i].m);
      EXPECT_DOUBLE_EQ(model.gate_state()[i].s, expect[i].s);
    }
    model.backward(testing::randn({2, 7}, 24));
    for (int64_t i = 0; i < model.num_blocks(); ++i)  // backward leaves the thresholds alone
      EXPECT_DOUBLE_EQ(model.gate_state()[i].m, expect[i].m);
  }
}

TEST(AmorModel, ThresholdsMoveOncePerTrainingForwardBeforeGating) {
  check_thresholds(tiny_amor("classic", 3));
  check_thresholds(tiny_amor("h", 1, "fixed"));
}

// Two ranks with one sequence each (the other rank's entropies supplied by the hook) decide and
// compute exactly what one rank with both sequences does.
TEST(AmorModel, GatheredStatisticsMakeTwoRanksEqualOne) {
  ModelConfig cfg = tiny_amor("classic", 3);
  cfg.amor.momentum = 0.5;  // a big EMA step so the batch statistics matter for the gates
  AmorModel one(cfg, DType::F64), rank0(cfg, DType::F64);
  one.params().initialize(31);
  perturb_amor_weights(one.params(), 32);
  for (auto& p : rank0.params().params()) p->value.copy_from(one.params().find(p->name)->value);
  const int64_t T = 7;
  Batch both = tiny_batch(cfg, 2, T, 33);
  StepOutput ref = one.forward(both, true);

  Batch first{both.tokens.slice_flat(0, {1, T}).clone(), both.targets.slice_flat(0, {1, T}).clone()};
  size_t block = 0;
  rank0.set_entropy_gather([&](const Tensor& local) {
    Tensor other = ref.gate_entropy[block++].slice_flat(T, {T});  // rank 1's sequence
    std::vector<double> v = local.to_vector<double>();
    for (double x : other.to_vector<double>()) v.push_back(x);
    return Tensor::from_vector<double>({2 * T}, v);
  });
  StepOutput out = rank0.forward(first, true);
  ASSERT_EQ(block, 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.tau[i], ref.tau[i]);
    EXPECT_EQ(out.gates[i].to_vector<uint8_t>(), ref.gates[i].slice_flat(0, {1, T}).to_vector<uint8_t>());
    EXPECT_EQ(rank0.gate_state()[i].m, one.gate_state()[i].m);
  }
  EXPECT_LT(testing::max_abs_diff(out.token_loss, ref.token_loss.slice_flat(0, {1, T})), 1e-13);
}

TEST(AmorModel, ParametersNamesDecayAndInit) {
  ModelConfig cfg = tiny_amor("classic", 3);
  AmorModel model(cfg, DType::F64);
  model.params().initialize(1);
  ParamStore& ps = model.params();
  EXPECT_EQ(ps.find("amor.0.norm.weight"), nullptr);  // block 0 reads norm_f's stream
  for (int i = 0; i < 3; ++i) {
    std::string b = "amor." + std::to_string(i);
    Param* o = ps.find(b + ".attn.o_proj.weight");
    ASSERT_NE(o, nullptr);
    EXPECT_TRUE(o->weight_decay);
    for (double x : o->value.to_vector<double>()) EXPECT_EQ(x, 0.0);
    Param* a = ps.find(b + ".alpha");
    ASSERT_NE(a, nullptr);
    EXPECT_FALSE(a->weight_decay);
    EXPECT_EQ(a->value.shape(), (Shape{cfg.d_model}));
    for (double x : a->value.to_vector<double>()) EXPECT_EQ(x, 0.0);
    EXPECT_NE(ps.find(b + ".attn.q_proj.weight"), nullptr);
    if (i > 0) {
      ASSERT_NE(ps.find(b + ".norm.weight"), nullptr);
      EXPECT_FALSE(ps.find(b + ".norm.weight")->weight_decay);
    }
  }
  ASSERT_NE(ps.find("norm_f.weight"), nullptr);
  ASSERT_NE(ps.find("final_norm.weight"), nullptr);
  std::vector<std::string> units = ps.unit_names();
  std::vector<std::string> want = {"embed",  "layers.0", "layers.1",  "norm_f",
                                   "amor.0", "amor.1",   "amor.2",    "final_norm"};
  EXPECT_EQ(units, want);
  for (auto& p : ps.params()) {
    if (p->value.dim() < 2) {
      EXPECT_FALSE(p->weight_decay) << p->name;
    }
  }
}

// The f32 model (what the CPU backend trains with) computes what the f64 one does, to f32
// rounding, with the same gates and thresholds.
TEST(AmorModel, FloatModelMatchesDouble) {
  ModelConfig cfg = tiny_amor("classic", 3);
  AmorModel m64(cfg, DType::F64), m32(cfg, DType::F32);
  m64.params().initialize(41);
  perturb_amor_weights(m64.params(), 42);
  for (auto& p : m32.params().params()) p->value.copy_from(m64.params().find(p->name)->value.to(DType::F32));
  Batch batch = tiny_batch(cfg, 2, 7, 43);
  Calibrated cal = calibrate_gates(m64, batch, true);
  ASSERT_GT(cal.margin, 1e-4);
  m32.set_gate_state(cal.state);
  Tensor w = testing::randn({2, 7}, 44);
  m64.params().zero_grad();
  m32.params().zero_grad();
  StepOutput a = m64.forward(batch, true), b = m32.forward(batch, true);
  m64.backward(w);
  m32.backward(w.to(DType::F32));
  EXPECT_TRUE(same_gates(a, b));
  for (size_t i = 0; i < a.tau.size(); ++i) EXPECT_NEAR(a.tau[i], b.tau[i], 1e-6);
  EXPECT_LT(testing::rel_rms(b.token_loss.to(DType::F64), a.token_loss), 1e-5);
  for (auto& p : m64.params().params())
    EXPECT_LT(testing::rel_rms(m32.params().find(p->name)->grad.to(DType::F64), p->grad), 1e-4)
        << p->name;
}

void expect_model_error_naming(const ModelConfig& c, const std::string& key) {
  try {
    AmorModel m(c, DType::F64);
    ADD_FAILURE() << "no error for a bad " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(AmorModel, BadConfigNamesTheKey) {
  ModelConfig c = tiny_amor("classic", 2);
  expect_model_error_naming(c, "model.amor.blocks");
  c.amor.blocks = 0;
  expect_model_error_naming(c, "model.amor.blocks");
  c = tiny_amor("classic", 3);
  c.amor.backbone = "rwkv";
  expect_model_error_naming(c, "model.amor.backbone");
  c = tiny_amor("both", 3);
  expect_model_error_naming(c, "model.amor.residual_mode");
  c = tiny_amor("classic", 3);
  c.amor.kappa = -1;
  expect_model_error_naming(c, "model.amor.kappa");
  c = tiny_amor("classic", 3);
  c.amor.momentum = 2;
  expect_model_error_naming(c, "model.amor.momentum");

  AmorModel m(tiny_amor("classic", 3), DType::F64);
  EXPECT_THROW(m.set_gate_state(std::vector<AmorGateState>(1)), Error);
}

}  // namespace
}  // namespace amor::model
