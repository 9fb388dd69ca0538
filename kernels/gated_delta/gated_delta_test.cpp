#include "kernels/gated_delta/gated_delta.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/gated_delta/gated_delta_testing.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gated_delta_inputs;
using testing::GatedDeltaInputs;
using testing::gradcheck;
using testing::randn;
using testing::rel_rms;

// Gradcheck of every input (and the initial state) through the backward of chunk_size
// (0 = recurrence), with upstream gradients on both o and the final state.
void check_gradients(int64_t T, int64_t chunk, uint64_t seed) {
  const int64_t B = 2, H = 2, K = 4, V = 6;
  GatedDeltaInputs x = gated_delta_inputs(B, T, H, K, V, true, seed);
  const double scale = gated_delta_default_scale(K);
  Tensor wo = randn({B, T, H, V}, seed + 10), ws = randn({B, H, K, V}, seed + 11);
  GatedDeltaGrads gr = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, wo, ws, chunk);
  auto forward = [&] {
    GatedDeltaOut out = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, chunk);
    return std::vector<Tensor>{out.o, out.final_state};
  };
  auto reports = gradcheck(forward, {wo, ws},
                           {{"q", x.q, gr.dq},
                            {"k", x.k, gr.dk},
                            {"v", x.v, gr.dv},
                            {"g", x.g, gr.dg},
                            {"beta", x.beta, gr.dbeta},
                            {"initial_state", x.s0, gr.dinitial_state}});
  for (auto& r : reports)
    ::testing::Test::RecordProperty("gradcheck_" + r.name, fmt::format("{:.3g}", r.error));
}

TEST(GatedDelta, GradcheckRecurrence) { check_gradients(13, 0, 100); }
TEST(GatedDelta, GradcheckChunked4) { check_gradients(13, 4, 200); }
TEST(GatedDelta, GradcheckChunked5) { check_gradients(13, 5, 300); }
TEST(GatedDelta, GradcheckChunkLongerThanSequence) { check_gradients(3, 8, 400); }

// Chunked == recurrence: outputs, final state and every gradient, double rel.rms <= 1e-12.
// Returns the worst relative error seen.
double expect_chunked_matches_recurrence(const GatedDeltaInputs& x, bool with_dsf, uint64_t seed,
                                         const std::vector<int64_t>& chunks) {
  const int64_t B = x.q.size(0), T = x.q.size(1), H = x.q.size(2), K = x.q.size(3);
  const int64_t V = x.v.size(3);
  const double scale = 0.7;
  Tensor wo = randn({B, T, H, V}, seed), ws = with_dsf ? randn({B, H, K, V}, seed + 1) : Tensor();
  GatedDeltaOut r = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, 0);
  GatedDeltaGrads rg = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, wo, ws, 0);
  double worst = 0;
  for (int64_t chunk : chunks) {
    SCOPED_TRACE("chunk_size " + std::to_string(chunk));
    GatedDeltaOut c = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, chunk);
    GatedDeltaGrads cg =
        gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, wo, ws, chunk);
    std::vector<std::pair<const char*, double>> errors = {
        {"o", rel_rms(c.o, r.o)},
        {"final_state", rel_rms(c.final_state, r.final_state)},
        {"dq", rel_rms(cg.dq, rg.dq)},
        {"dk", rel_rms(cg.dk, rg.dk)},
        {"dv", rel_rms(cg.dv, rg.dv)},
        {"dg", rel_rms(cg.dg, rg.dg)},
        {"dbeta", rel_rms(cg.dbeta, rg.dbeta)}};
    EXPECT_EQ(cg.dinitial_state.defined(), x.s0.defined());
    if (x.s0.defined() && cg.dinitial_state.defined())
      errors.push_back({"dinitial_state", rel_rms(cg.dinitial_state, rg.dinitial_state)});
    for (auto& [name, e] : errors) {
      EXPECT_LE(e, 1e-12) << name;
      worst = std::max(worst, e);
    }
  }
  return worst;
}

TEST(GatedDelta, ChunkedEqualsRecurrence) {
  double worst = 0;
  for (bool with_state : {false, true}) {
    for (bool with_dsf : {false, true}) {
      SCOPED_TRACE(std::string("initial state ") + (with_state ? "yes" : "no") +
                   ", d_final_state " + (with_dsf ? "yes" : "no"));
      GatedDeltaInputs x = gated_delta_inputs(2, 13, 2, 4, 6, with_state, 500);
      worst =
          std::max(worst, expect_chunked_matches_recurrence(x, with_dsf, 510, {1, 3, 4, 16, 64}));
    }
  }
  RecordProperty("worst_rel_rms_vs_recurrence", fmt::format("{:.3g}", worst));
}

// Strong forgetting (exp(cumsum g) underflows towards 0 inside a chunk) and a longer sequence
// with the default chunk: the chunked form stays exact because every exponent it takes is <= 0.
TEST(GatedDelta, ChunkedEqualsRecurrenceStrongDecayLongSequence) {
  GatedDeltaInputs x = gated_delta_inputs(1, 70, 2, 5, 3, true, 600, DType::F64, -12.0, -2.0);
  double worst = expect_chunked_matches_recurrence(x, true, 610, {7, 64});
  GatedDeltaInputs y = gated_delta_inputs(1, 150, 1, 8, 8, true, 620);
  worst = std::max(worst, expect_chunked_matches_recurrence(y, true, 630, {64}));
  RecordProperty("worst_rel_rms_vs_recurrence", fmt::format("{:.3g}", worst));
}

// One step by hand: from a zero state, S_1 = beta k v^T and o = scale beta (q.k) v.
TEST(GatedDelta, FirstStepFromZeroState) {
  GatedDeltaInputs x = gated_delta_inputs(1, 1, 1, 3, 2, false, 700);
  const double scale = 0.5;
  GatedDeltaOut out = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, Tensor(), scale, 64);
  double qk = 0;
  for (int i = 0; i < 3; ++i) qk += x.q.item(i) * x.k.item(i);
  const double beta = x.beta.item(0);
  for (int c = 0; c < 2; ++c) EXPECT_NEAR(out.o.item(c), scale * beta * qk * x.v.item(c), 1e-15);
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 2; ++c)
      EXPECT_NEAR(out.final_state.item(i * 2 + c), beta * x.k.item(i) * x.v.item(c), 1e-15);
}

// The decode step applied T times reproduces the scan's outputs and final state.
TEST(GatedDelta, DecodeStepsEqualScan) {
  const int64_t B = 2, T = 9, H = 3, K = 4, V = 5;
  GatedDeltaInputs x = gated_delta_inputs(B, T, H, K, V, true, 800);
  const double scale = gated_delta_default_scale(K);
  GatedDeltaOut scan = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, 4);
  Tensor state = x.s0.clone();
  Tensor o = Tensor::empty({B, T, H, V}, DType::F64);
  auto step_slice = [&](const Tensor& src, int64_t t, const Shape& shape) {
    // [B,T,H,D] -> the [B,H,D] slice of step t
    const int64_t per = shape_numel(shape) / B;
    Tensor s = Tensor::empty(shape, DType::F64);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(src.data<double>() + (b * T + t) * per, per, s.data<double>() + b * per);
    return s;
  };
  for (int64_t t = 0; t < T; ++t) {
    Tensor ot = gated_delta_step(step_slice(x.q, t, {B, H, K}), step_slice(x.k, t, {B, H, K}),
                                 step_slice(x.v, t, {B, H, V}), step_slice(x.g, t, {B, H}),
                                 step_slice(x.beta, t, {B, H}), scale, state);
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(ot.data<double>() + b * H * V, H * V, o.data<double>() + (b * T + t) * H * V);
  }
  EXPECT_LE(rel_rms(o, scan.o), 1e-13);
  EXPECT_LE(rel_rms(state, scan.final_state), 1e-13);
}

// The float reference (chunked and recurrent) tracks the double one.
TEST(GatedDelta, FloatMatchesDouble) {
  GatedDeltaInputs x = gated_delta_inputs(2, 21, 2, 8, 6, true, 900);
  GatedDeltaInputs xf = gated_delta_inputs(2, 21, 2, 8, 6, true, 900, DType::F32);
  Tensor wo = randn({2, 21, 2, 6}, 910);
  GatedDeltaOut ref = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5, 0);
  GatedDeltaGrads rg = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5, wo, {}, 0);
  for (int64_t chunk : {0, 8}) {
    GatedDeltaOut f = gated_delta_forward(xf.q, xf.k, xf.v, xf.g, xf.beta, xf.s0, 0.5, chunk);
    GatedDeltaGrads fg = gated_delta_backward(xf.q, xf.k, xf.v, xf.g, xf.beta, xf.s0, 0.5,
                                              wo.to(DType::F32), {}, chunk);
    EXPECT_LT(rel_rms(f.o, ref.o), 1e-5);
    EXPECT_LT(rel_rms(f.final_state, ref.final_state), 1e-5);
    EXPECT_LT(rel_rms(fg.dq, rg.dq), 1e-5);
    EXPECT_LT(rel_rms(fg.dk, rg.dk), 1e-5);
    EXPECT_LT(rel_rms(fg.dv, rg.dv), 1e-5);
    EXPECT_LT(rel_rms(fg.dg, rg.dg), 1e-5);
    EXPECT_LT(rel_rms(fg.dbeta, rg.dbeta), 1e-5);
    EXPECT_LT(rel_rms(fg.dinitial_state, rg.dinitial_state), 1e-5);
  }
}

TEST(GatedDelta, NoInitialStateGivesNoStateGradient) {
  GatedDeltaInputs x = gated_delta_inputs(1, 5, 2, 3, 4, false, 1000);
  Tensor wo = randn({1, 5, 2, 4}, 1010);
  GatedDeltaGrads gr = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, {}, 0.5, wo, {}, 2);
  EXPECT_FALSE(gr.dinitial_state.defined());
  // An undefined d_final_state is the same as a zero one.
  GatedDeltaGrads gz = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, {}, 0.5, wo,
                                            Tensor::zeros({1, 2, 3, 4}, DType::F64), 2);
  EXPECT_EQ(rel_rms(gz.dg, gr.dg), 0.0);
  EXPECT_EQ(rel_rms(gz.dk, gr.dk), 0.0);
}

// T = 0 (an empty prompt chunk): the state passes through unchanged, and so does its gradient.
TEST(GatedDelta, EmptySequencePassesStateThrough) {
  GatedDeltaInputs x = gated_delta_inputs(2, 0, 2, 3, 4, true, 1050);
  Tensor ws = randn({2, 2, 3, 4}, 1060);
  for (int64_t chunk : {0, 64}) {
    GatedDeltaOut out = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5, chunk);
    EXPECT_EQ(out.o.shape(), (Shape{2, 0, 2, 4}));
    EXPECT_EQ(rel_rms(out.final_state, x.s0), 0.0);
    GatedDeltaGrads gr = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5,
                                              Tensor::empty({2, 0, 2, 4}, DType::F64), ws, chunk);
    EXPECT_EQ(rel_rms(gr.dinitial_state, ws), 0.0);
  }
}

TEST(GatedDelta, BadInputsNameTheOpAndShapes) {
  GatedDeltaInputs x = gated_delta_inputs(1, 4, 2, 3, 5, true, 1100);
  Tensor v_bad = Tensor::zeros({1, 5, 2, 5}, DType::F64);
  try {
    gated_delta_forward(x.q, x.k, v_bad, x.g, x.beta, x.s0, 0.5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "gated_delta_forward: argument 'v' is f64[1,5,2,5]@cpu, expected shape [1,4,2,*]");
  }
  try {
    gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5, -1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "gated_delta_forward: chunk_size is -1, expected 0 (step-by-step recurrence) or "
                 "a chunk length > 0");
  }
  Tensor s_bad = Tensor::zeros({1, 2, 5, 3}, DType::F64);  // K and V swapped
  EXPECT_THROW(gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, s_bad, 0.5), Error);
  EXPECT_THROW(gated_delta_forward(x.q, x.k.to(DType::F32), x.v, x.g, x.beta, x.s0, 0.5), Error);
  EXPECT_THROW(gated_delta_forward(x.q, x.k, x.v, x.beta.view({1, 4, 2, 1}), x.beta, x.s0, 0.5),
               Error);
  EXPECT_THROW(gated_delta_forward(x.q.view({4, 2, 3}), x.k, x.v, x.g, x.beta, x.s0, 0.5), Error);
  EXPECT_THROW(gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, std::nan("")), Error);
  Tensor wo = Tensor::zeros({1, 4, 2, 5}, DType::F64);
  EXPECT_THROW(gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5,
                                    Tensor::zeros({1, 4, 2, 3}, DType::F64), {}),
               Error);
  EXPECT_THROW(gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, 0.5, wo,
                                    Tensor::zeros({1, 2, 3, 5}, DType::F32)),
               Error);
  Tensor qi = Tensor::zeros({1, 4, 2, 3}, DType::I32);
  EXPECT_THROW(gated_delta_forward(qi, qi, qi, Tensor::zeros({1, 4, 2}, DType::I32),
                                   Tensor::zeros({1, 4, 2}, DType::I32), {}, 0.5),
               Error);
  Tensor state = Tensor::zeros({1, 2, 3, 4}, DType::F64);  // V = 4, but v_t has V = 5
  try {
    gated_delta_step(Tensor::zeros({1, 2, 3}, DType::F64), Tensor::zeros({1, 2, 3}, DType::F64),
                     Tensor::zeros({1, 2, 5}, DType::F64), Tensor::zeros({1, 2}, DType::F64),
                     Tensor::zeros({1, 2}, DType::F64), 0.5, state);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "gated_delta_step: argument 'state' is f64[1,2,3,4]@cpu, expected shape [1,2,3,5]");
  }
}

}  // namespace
}  // namespace amor
