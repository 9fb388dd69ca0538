// AMOR's entropy gate on its own: the batch statistics (torch.median's lower middle, unbiased
// std), the EMA update before gating in training, the frozen EMA outside it, the fixed offset
// mode, the cross-rank gather hook, and config errors that name their key.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/core/backend.h"
#include "models/amor/amor_gate.h"

namespace amor::model {
namespace {

Tensor values(const std::vector<double>& v) {
  return Tensor::from_vector<double>({static_cast<int64_t>(v.size())}, v);
}

TEST(AmorGate, StatsAreLowerMedianAndUnbiasedStd) {
  EntropyStats even = entropy_stats(values({0.4, 0.1, 0.3, 0.2}));
  EXPECT_EQ(even.median, 0.2);  // torch.median: the lower of the two middle values
  double ss = 0.15 * 0.15 + 0.15 * 0.15 + 0.05 * 0.05 + 0.05 * 0.05;  // about the mean 0.25
  EXPECT_NEAR(even.std, std::sqrt(ss / 3), 1e-15);
  EXPECT_EQ(entropy_stats(values({0.9, 0.5, 0.7})).median, 0.7);
  EntropyStats one = entropy_stats(values({0.5}));
  EXPECT_EQ(one.median, 0.5);
  EXPECT_TRUE(std::isnan(one.std));
}

TEST(AmorGate, TrainingUpdatesTheEmaFirstThenGates) {
  AmorConfig c;
  c.momentum = 0.5;  // a big step so the update visibly moves the threshold
  c.m_init = 0.3;
  c.s_init = 0.1;
  c.kappa = 0.2;
  AmorGate g(c);
  EXPECT_DOUBLE_EQ(g.tau(), 0.3 + 0.2 * 0.1);
  // [B=2, T=3]; the old tau 0.32 would fire at 0.35 and 0.5, the updated one does not at 0.35.
  std::vector<double> h = {0.35, 0.5, 0.6, 0.45, 0.7, 0.2};
  Tensor H = Tensor::from_vector<double>({2, 3}, h);
  EntropyStats st = entropy_stats(H);
  EXPECT_EQ(st.median, 0.45);
  GateDecision d = g.decide(H, /*training=*/true);
  double m = 0.5 * 0.3 + 0.5 * st.median, s = 0.5 * 0.1 + 0.5 * st.std;
  EXPECT_DOUBLE_EQ(g.state().m, m);
  EXPECT_DOUBLE_EQ(g.state().s, s);
  EXPECT_DOUBLE_EQ(d.tau(), m + 0.2 * s);
  ASSERT_EQ(d.gate.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(d.gate.data<uint8_t>()[i], h[i] > d.tau() ? 1 : 0);
  EXPECT_EQ(d.gate.data<uint8_t>()[0], 0);  // 0.35 < new tau ~0.41: gated with the new tau

  // Outside training the EMA is frozen and gates with the current tau.
  GateDecision e = g.decide(H, /*training=*/false);
  EXPECT_DOUBLE_EQ(g.state().m, m);
  EXPECT_DOUBLE_EQ(g.state().s, s);
  EXPECT_DOUBLE_EQ(e.tau(), d.tau());
  // Each training call is one update.
  g.decide(H, true);
  EXPECT_DOUBLE_EQ(g.state().m, 0.5 * m + 0.5 * st.median);
}

TEST(AmorGate, FixedOffsetModeLeavesStdAlone) {
  AmorConfig c;
  c.offset_mode = "fixed";
  AmorGate g(c);
  Tensor H = values({0.1, 0.9, 0.5, 0.6});
  GateDecision d = g.decide(H, true);
  EXPECT_DOUBLE_EQ(g.state().m, 0.99 * 0.3 + 0.01 * 0.5);
  EXPECT_EQ(g.state().s, 0.1);
  EXPECT_DOUBLE_EQ(d.tau(), g.state().m + 0.03);
}

TEST(AmorGate, OneEntropyLeavesStdAlone) {
  AmorGate g(AmorConfig{});
  g.decide(values({0.7}), true);
  EXPECT_DOUBLE_EQ(g.state().m, 0.99 * 0.3 + 0.01 * 0.7);
  EXPECT_EQ(g.state().s, 0.1);
}

TEST(AmorGate, StatisticsComeFromTheGatheredEntropies) {
  AmorGate g(AmorConfig{});
  Tensor other = values({0.9, 0.8, 0.95});  // another rank's micro-batch
  g.set_gather([&](const Tensor& local) {
    std::vector<double> v = local.to_vector<double>();
    for (double x : other.to_vector<double>()) v.push_back(x);
    return values(v);
  });
  Tensor H = values({0.1, 0.2, 0.3});
  GateDecision d = g.decide(H, true);
  EntropyStats all = entropy_stats(values({0.1, 0.2, 0.3, 0.9, 0.8, 0.95}));
  EXPECT_DOUBLE_EQ(g.state().m, 0.99 * 0.3 + 0.01 * all.median);
  EXPECT_DOUBLE_EQ(g.state().s, 0.99 * 0.1 + 0.01 * all.std);
  EXPECT_EQ(d.gate.numel(), 3);  // the decision is for the local tokens only
}

// The state a decision returns is a snapshot: later steps replace the gate's state, never write
// into the one an earlier forward used.
TEST(AmorGate, DecisionKeepsTheStateItUsed) {
  AmorConfig c;
  c.momentum = 0.5;
  AmorGate g(c);
  Tensor H = values({0.1, 0.9, 0.5, 0.6});
  GateDecision first = g.decide(H, true);
  const double tau1 = first.tau();
  g.decide(values({0.9, 0.95, 0.99}), true);
  EXPECT_EQ(first.tau(), tau1);
  EXPECT_NE(g.tau(), tau1);
  EXPECT_EQ(g.device_state().item(2), g.tau());
}

// set_state (a checkpoint's) replaces m and s and the threshold they give; the next step starts
// from it.
TEST(AmorGate, SetStateIsWhatTheNextStepStartsFrom) {
  AmorConfig c;
  c.kappa = 2;
  AmorGate g(c);
  g.decide(values({0.1, 0.9, 0.5, 0.6}), true);
  g.set_state({0.4, 0.05});
  EXPECT_EQ(g.state().m, 0.4);
  EXPECT_EQ(g.state().s, 0.05);
  EXPECT_EQ(g.tau(), 0.4 + 2 * 0.05);
  GateDecision e = g.decide(values({0.45, 0.55}), false);
  EXPECT_EQ(e.tau(), 0.4 + 2 * 0.05);
  EXPECT_EQ(e.gate.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  g.decide(values({0.2, 0.3, 0.4}), true);
  EXPECT_EQ(g.state().m, 0.99 * 0.4 + (1 - 0.99) * 0.3);
}

// The gather must hand the entropies back on the gate's device.
TEST(AmorGate, GatherThatMovesTheEntropiesIsAnError) {
  AmorGate g(AmorConfig{});
  g.set_gather([](const Tensor&) { return Tensor(); });
  try {
    g.decide(values({0.5, 0.6}), true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("amor gate: the entropy gather returned"), std::string::npos) << e.what();
  }
}

// The gate on cuda entropies (GPU machine only) against the same gate on the cpu: training steps
// and an evaluation, the state read back only at the end (and after set_state, uploaded again).
// The median is exact, so m is bitwise equal; s and tau follow the std to double rounding; gates
// agree away from tau.
TEST(AmorGate, CudaEqualsCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU here";
  AmorConfig c;
  c.momentum = 0.8;
  AmorGate cpu(c), gpu(c);
  auto check = [&](const GateDecision& a, const GateDecision& b, const Tensor& H) {
    EXPECT_EQ(b.gate.device(), Device::CUDA);
    EXPECT_EQ(b.state.device(), Device::CUDA);
    Tensor g = b.gate.to(Device::CPU);
    const double tau = a.tau();
    EXPECT_NEAR(b.tau(), tau, 1e-9 * tau);
    for (int64_t i = 0; i < H.numel(); ++i) {
      if (std::abs(H.item(i) - tau) <= 1e-9) continue;  // within rounding of tau: either way
      EXPECT_EQ(g.data<uint8_t>()[i], a.gate.data<uint8_t>()[i]) << i;
    }
  };
  for (int step = 0; step < 5; ++step) {
    std::vector<float> h(4 * 333);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>((i * 7919 + step * 104729) % 1000) / 1000.0f;
    Tensor H = Tensor::from_vector<float>({4, 333}, h);
    check(cpu.decide(H, true), gpu.decide(H.to(Device::CUDA), true), H);
    if (step == 2) check(cpu.decide(H, false), gpu.decide(H.to(Device::CUDA), false), H);
    if (step == 3) {
      cpu.set_state({0.45, 0.12});
      gpu.set_state({0.45, 0.12});
    }
  }
  EXPECT_EQ(gpu.state().m, cpu.state().m);
  EXPECT_NEAR(gpu.state().s, cpu.state().s, 1e-9 * cpu.state().s);
  EXPECT_NEAR(gpu.tau(), cpu.tau(), 1e-9 * cpu.tau());
}

void expect_error_naming(const AmorConfig& c, const std::string& key) {
  try {
    AmorGate g(c);
    ADD_FAILURE() << "no error for a bad " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(AmorGate, BadConfigNamesTheKey) {
  AmorConfig c;
  c.kappa = -0.1;
  expect_error_naming(c, "model.amor.kappa");
  c.kappa = NAN;
  expect_error_naming(c, "model.amor.kappa");
  c = AmorConfig{};
  c.momentum = 1.5;
  expect_error_naming(c, "model.amor.momentum");
  c.momentum = -0.1;
  expect_error_naming(c, "model.amor.momentum");
  c = AmorConfig{};
  c.offset_mode = "median";
  expect_error_naming(c, "model.amor.offset_mode");
  c = AmorConfig{};
  c.s_init = -1;
  expect_error_naming(c, "model.amor.s_init");
  c = AmorConfig{};
  c.fixed_offset = INFINITY;
  expect_error_naming(c, "model.amor.fixed_offset");
}

}  // namespace
}  // namespace amor::model
