#include <gtest/gtest.h>

#include <string>

#include "kernels/conv1d/conv1d.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::GradInput;
using testing::max_abs_diff;
using testing::randn;

struct Config {
  int64_t T;
  bool bias, state, silu;
};

// Every differentiable input against finite differences, with a loss that reads both y and the
// final state (so the final-state gradient path is checked too).
void check_grads(const Config& cfg, uint64_t seed) {
  const int64_t B = 2, C = 3, K = 4;
  SCOPED_TRACE("T=" + std::to_string(cfg.T) + " bias=" + std::to_string(cfg.bias) +
               " state=" + std::to_string(cfg.state) + " silu=" + std::to_string(cfg.silu));
  Tensor x = randn({B, cfg.T, C}, seed);
  Tensor w = randn({C, K}, seed + 1, DType::F64, 0.7);
  Tensor bias = cfg.bias ? randn({C}, seed + 2) : Tensor();
  Tensor s0 = cfg.state ? randn({B, C, K - 1}, seed + 3) : Tensor();
  Tensor dy = randn({B, cfg.T, C}, seed + 4);
  Tensor ds1 = randn({B, C, K - 1}, seed + 5);
  Conv1dGrads g = conv1d_backward(x, w, bias, cfg.silu, s0, dy, ds1);
  EXPECT_EQ(g.dbias.defined(), cfg.bias);
  EXPECT_EQ(g.dinitial_state.defined(), cfg.state);
  std::vector<GradInput> inputs{{"x", x, g.dx}, {"weight", w, g.dweight}};
  if (cfg.bias) inputs.push_back({"bias", bias, g.dbias});
  if (cfg.state) inputs.push_back({"initial_state", s0, g.dinitial_state});
  gradcheck(
      [&] {
        Conv1dOutput o = conv1d_forward(x, w, bias, cfg.silu, s0);
        return std::vector<Tensor>{o.y, o.final_state};
      },
      {dy, ds1}, inputs);
}

TEST(Conv1d, GradcheckDouble) {
  uint64_t seed = 100;
  // T=2 < K-1: the final state reaches into the initial state; T=7: no multiple of anything.
  for (int64_t T : {2, 7})
    for (bool bias : {false, true})
      for (bool state : {false, true})
        for (bool silu : {false, true}) check_grads({T, bias, state, silu}, seed += 10);
}

TEST(Conv1d, GradcheckWithoutFinalStateGradient) {
  Tensor x = randn({1, 5, 2}, 1), w = randn({2, 3}, 2), bias = randn({2}, 3);
  Tensor s0 = randn({1, 2, 2}, 4), dy = randn({1, 5, 2}, 5);
  Conv1dGrads g = conv1d_backward(x, w, bias, true, s0, dy);
  gradcheck([&] { return std::vector<Tensor>{conv1d_forward(x, w, bias, true, s0).y}; }, {dy},
            {{"x", x, g.dx}, {"weight", w, g.dweight}, {"bias", bias, g.dbias},
             {"initial_state", s0, g.dinitial_state}});
}

TEST(Conv1d, KernelSizesOneAndTwo) {
  for (int64_t K : {1, 2}) {
    Tensor x = randn({2, 5, 3}, 10 + K), w = randn({3, K}, 20 + K), bias = randn({3}, 30 + K);
    Tensor s0 = randn({2, 3, K - 1}, 40 + K), dy = randn({2, 5, 3}, 50 + K);
    Conv1dGrads g = conv1d_backward(x, w, bias, true, s0, dy);
    std::vector<GradInput> inputs{{"x", x, g.dx}, {"weight", w, g.dweight}, {"bias", bias, g.dbias}};
    if (K > 1) inputs.push_back({"initial_state", s0, g.dinitial_state});
    gradcheck([&] { return std::vector<Tensor>{conv1d_forward(x, w, bias, true, s0).y}; }, {dy},
              inputs);
  }
}

// With T < K-1 the final state is the tail of [initial_state, x].
TEST(Conv1d, FinalStateShortSequence) {
  const int64_t B = 2, C = 3, K = 4;
  Tensor x = randn({B, 1, C}, 7), w = randn({C, K}, 8), s0 = randn({B, C, K - 1}, 9);
  Tensor s1 = conv1d_forward(x, w, Tensor(), false, s0).final_state;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t base = (b * C + c) * (K - 1);
      EXPECT_EQ(s1.item(base + 0), s0.item(base + 1));
      EXPECT_EQ(s1.item(base + 1), s0.item(base + 2));
      EXPECT_EQ(s1.item(base + 2), x.item(b * C + c));
    }
}

// Decode: T steps from a state equal one forward over the sequence, outputs and final state.
TEST(Conv1d, StepsEqualForward) {
  const int64_t B = 2, T = 6, C = 5, K = 4;
  for (bool zero_state : {true, false}) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor x = randn({B, T, C}, 60, dt), w = randn({C, K}, 61, dt), bias = randn({C}, 62, dt);
      Tensor s0 = zero_state ? Tensor::zeros({B, C, K - 1}, dt) : randn({B, C, K - 1}, 63, dt);
      Conv1dOutput full = conv1d_forward(x, w, bias, true, zero_state ? Tensor() : s0);
      Tensor state = s0.clone();
      Tensor y = Tensor::empty({B, T, C}, dt);
      for (int64_t t = 0; t < T; ++t) {
        Tensor xt = Tensor::empty({B, C}, dt), yt;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t c = 0; c < C; ++c) xt.set_item(b * C + c, x.item((b * T + t) * C + c));
        yt = conv1d_step(xt, state, w, bias, true);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t c = 0; c < C; ++c) y.set_item((b * T + t) * C + c, yt.item(b * C + c));
      }
      EXPECT_EQ(max_abs_diff(y, full.y), 0.0);
      EXPECT_EQ(max_abs_diff(state, full.final_state), 0.0);
    }
  }
}

// Prefill in two pieces, carrying the state, equals one forward over the whole sequence.
TEST(Conv1d, ChunkedForwardCarriesState) {
  const int64_t B = 1, C = 4, K = 4, T1 = 2, T2 = 5;
  Tensor x = randn({B, T1 + T2, C}, 70), w = randn({C, K}, 71), bias = randn({C}, 72);
  Conv1dOutput full = conv1d_forward(x, w, bias, false);
  Tensor x1 = x.slice_flat(0, {B, T1, C}), x2 = x.slice_flat(T1 * C, {B, T2, C});
  Conv1dOutput a = conv1d_forward(x1, w, bias, false);
  Conv1dOutput b = conv1d_forward(x2, w, bias, false, a.final_state);
  EXPECT_EQ(max_abs_diff(a.y, full.y.slice_flat(0, {B, T1, C})), 0.0);
  EXPECT_EQ(max_abs_diff(b.y, full.y.slice_flat(T1 * C, {B, T2, C})), 0.0);
  EXPECT_EQ(max_abs_diff(b.final_state, full.final_state), 0.0);
}

TEST(Conv1d, FloatMatchesDouble) {
  Tensor x = randn({2, 9, 6}, 80), w = randn({6, 4}, 81), bias = randn({6}, 82);
  Tensor s0 = randn({2, 6, 3}, 83), dy = randn({2, 9, 6}, 84);
  auto f = [](const Tensor& t) { return t.to(DType::F32); };
  Conv1dOutput od = conv1d_forward(x, w, bias, true, s0);
  Conv1dOutput of = conv1d_forward(f(x), f(w), f(bias), true, f(s0));
  EXPECT_LT(testing::rel_rms(of.y, od.y), 1e-6);
  Conv1dGrads gd = conv1d_backward(x, w, bias, true, s0, dy);
  Conv1dGrads gf = conv1d_backward(f(x), f(w), f(bias), true, f(s0), f(dy));
  EXPECT_LT(testing::rel_rms(gf.dx, gd.dx), 1e-6);
  EXPECT_LT(testing::rel_rms(gf.dweight, gd.dweight), 1e-6);
  EXPECT_LT(testing::rel_rms(gf.dbias, gd.dbias), 1e-6);
  EXPECT_LT(testing::rel_rms(gf.dinitial_state, gd.dinitial_state), 1e-6);
}

TEST(Conv1d, BadInputsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({2, 5, 3}, DType::F32), w = Tensor::zeros({3, 4}, DType::F32);
  try {
    conv1d_forward(x, Tensor::zeros({4, 4}, DType::F32), Tensor(), true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "conv1d_forward: argument 'weight' is f32[4,4]@cpu, expected shape [3,*]");
  }
  try {
    conv1d_forward(x, w, Tensor(), true, Tensor::zeros({2, 3, 4}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "conv1d_forward: argument 'initial_state' is f32[2,3,4]@cpu, "
                           "expected shape [2,3,3]");
  }
  EXPECT_THROW(conv1d_forward(x.view({10, 3}), w, Tensor(), true), Error);
  EXPECT_THROW(conv1d_forward(x, Tensor::zeros({3, 0}, DType::F32), Tensor(), true), Error);
  EXPECT_THROW(conv1d_forward(x, w, Tensor::zeros({4}, DType::F32), true), Error);
  EXPECT_THROW(conv1d_forward(x, w, Tensor::zeros({3}, DType::F64), true), Error);
  EXPECT_THROW(conv1d_forward(x, w.to(DType::F64), Tensor(), true), Error);
  EXPECT_THROW(conv1d_forward(x.to(DType::I32), w.to(DType::I32), Tensor(), true), Error);
  EXPECT_THROW(conv1d_backward(x, w, Tensor(), true, Tensor(), Tensor::zeros({2, 4, 3}, DType::F32)),
               Error);
  EXPECT_THROW(conv1d_backward(x, w, Tensor(), true, Tensor(), x, Tensor::zeros({2, 3, 4}, DType::F32)),
               Error);
  Tensor state = Tensor::zeros({2, 3, 2}, DType::F32);
  EXPECT_THROW(conv1d_step(Tensor::zeros({2, 3}, DType::F32), state, w, Tensor(), true), Error);
}

}  // namespace
}  // namespace amor
