#include <gtest/gtest.h>

#include "kernels/ssd/ssd.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;
using testing::rel_rms;
using testing::uniform;

struct Inputs {
  Tensor x, dt, A, B, C, D, h0;
};

// Random inputs in the model's regime: dt > 0, A < 0, so every decay lies in (0, 1).
Inputs make_inputs(int64_t batch, int64_t T, int64_t H, int64_t P, int64_t G, int64_t N,
                   bool with_h0, uint64_t seed, DType dtype = DType::F64) {
  Inputs in;
  in.x = randn({batch, T, H, P}, seed + 1, dtype);
  in.dt = uniform({batch, T, H}, seed + 2, 0.05, 0.8, dtype);
  in.A = uniform({H}, seed + 3, -1.5, -0.2, dtype);
  in.B = randn({batch, T, G, N}, seed + 4, dtype);
  in.C = randn({batch, T, G, N}, seed + 5, dtype);
  in.D = randn({H}, seed + 6, dtype);
  if (with_h0) in.h0 = randn({batch, H, P, N}, seed + 7, dtype);
  return in;
}

SsdOut forward(const Inputs& in, int64_t chunk) {
  return ssd_forward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0, chunk);
}

SsdGrads backward(const Inputs& in, const Tensor& dy, const Tensor& dfinal, int64_t chunk) {
  return ssd_backward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0, dy, dfinal, chunk);
}

// Finite differences of L = <wy, y> + <wS, final_state> against the backward at this chunk size.
void check_gradients(int64_t T, int64_t G, int64_t chunk, bool with_h0, bool with_dfinal,
                     uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "T=" << T << " G=" << G << " chunk=" << chunk
                                    << " h0=" << with_h0 << " dfinal=" << with_dfinal);
  const int64_t batch = 2, H = 4, P = 3, N = 5;
  Inputs in = make_inputs(batch, T, H, P, G, N, with_h0, seed);
  Tensor wy = randn({batch, T, H, P}, seed + 10);
  Tensor wS = with_dfinal ? randn({batch, H, P, N}, seed + 11) : Tensor();
  SsdGrads g = backward(in, wy, wS, chunk);
  std::vector<testing::GradInput> inputs = {{"x", in.x, g.dx}, {"dt", in.dt, g.ddt},
                                            {"A", in.A, g.dA}, {"B", in.B, g.dB},
                                            {"C", in.C, g.dC}, {"D", in.D, g.dD}};
  if (with_h0) inputs.push_back({"initial_state", in.h0, g.dinitial_state});
  gradcheck(
      [&] {
        SsdOut o = forward(in, chunk);
        return std::vector<Tensor>{o.y, o.final_state};
      },
      {wy, wS}, inputs);
}

TEST(Ssd, RecurrentGradcheck) {
  check_gradients(13, 1, 0, true, true, 100);
  check_gradients(13, 2, 0, true, true, 200);
  check_gradients(13, 2, 0, false, false, 300);
  check_gradients(1, 4, 0, true, true, 400);
}

TEST(Ssd, ChunkedGradcheck) {
  check_gradients(13, 1, 4, true, true, 500);
  check_gradients(13, 2, 4, true, true, 600);
  check_gradients(13, 1, 5, true, true, 700);
  check_gradients(13, 2, 5, false, true, 800);
  check_gradients(3, 2, 8, true, true, 900);
  check_gradients(3, 1, 8, true, false, 1000);
  check_gradients(13, 4, 3, false, false, 1100);
}

// The chunked algorithm reproduces the recurrence: outputs, final state and every gradient.
TEST(Ssd, ChunkedMatchesRecurrence) {
  const int64_t batch = 2, T = 13, H = 4, P = 3, G = 2, N = 5;
  for (bool with_h0 : {false, true}) {
    Inputs in = make_inputs(batch, T, H, P, G, N, with_h0, 1200 + with_h0);
    Tensor dy = randn({batch, T, H, P}, 1210), dS = randn({batch, H, P, N}, 1211);
    SsdOut ref_out = forward(in, 0);
    SsdGrads ref_g = backward(in, dy, dS, 0);
    for (int64_t chunk : std::vector<int64_t>{1, 3, 4, 13, 16, 64, int64_t{1} << 40}) {
      SCOPED_TRACE(::testing::Message() << "chunk=" << chunk << " h0=" << with_h0);
      SsdOut o = forward(in, chunk);
      SsdGrads g = backward(in, dy, dS, chunk);
      EXPECT_LE(rel_rms(o.y, ref_out.y), 1e-12);
      EXPECT_LE(rel_rms(o.final_state, ref_out.final_state), 1e-12);
      EXPECT_LE(rel_rms(g.dx, ref_g.dx), 1e-12);
      EXPECT_LE(rel_rms(g.ddt, ref_g.ddt), 1e-12);
      EXPECT_LE(rel_rms(g.dA, ref_g.dA), 1e-12);
      EXPECT_LE(rel_rms(g.dB, ref_g.dB), 1e-12);
      EXPECT_LE(rel_rms(g.dC, ref_g.dC), 1e-12);
      EXPECT_LE(rel_rms(g.dD, ref_g.dD), 1e-12);
      ASSERT_EQ(g.dinitial_state.defined(), with_h0);
      if (with_h0) {
        EXPECT_LE(rel_rms(g.dinitial_state, ref_g.dinitial_state), 1e-12);
      }
    }
  }
}

// An undefined initial state means zeros; an undefined d_final_state means zeros.
TEST(Ssd, UndefinedStatesAreZeros) {
  const int64_t batch = 1, T = 7, H = 4, P = 2, G = 1, N = 3;
  Inputs in = make_inputs(batch, T, H, P, G, N, false, 1300);
  Inputs zero = in;
  zero.h0 = Tensor::zeros({batch, H, P, N}, DType::F64);
  Tensor dy = randn({batch, T, H, P}, 1310), dS0 = Tensor::zeros({batch, H, P, N}, DType::F64);
  for (int64_t chunk : {0, 3}) {
    SsdOut a = forward(in, chunk), b = forward(zero, chunk);
    EXPECT_EQ(testing::max_abs_diff(a.y, b.y), 0.0);
    EXPECT_EQ(testing::max_abs_diff(a.final_state, b.final_state), 0.0);
    SsdGrads ga = backward(in, dy, Tensor(), chunk), gb = backward(zero, dy, dS0, chunk);
    EXPECT_FALSE(ga.dinitial_state.defined());
    EXPECT_TRUE(gb.dinitial_state.defined());
    EXPECT_EQ(testing::max_abs_diff(ga.dx, gb.dx), 0.0);
    EXPECT_EQ(testing::max_abs_diff(ga.ddt, gb.ddt), 0.0);
    EXPECT_EQ(testing::max_abs_diff(ga.dA, gb.dA), 0.0);
    EXPECT_EQ(testing::max_abs_diff(ga.dB, gb.dB), 0.0);
    EXPECT_EQ(testing::max_abs_diff(ga.dC, gb.dC), 0.0);
    EXPECT_EQ(testing::max_abs_diff(ga.dD, gb.dD), 0.0);
  }
}

// keep_for_backward keeps nothing on the CPU (saved is the GPU kernels'), and the results are
// the same bits as without it.
TEST(Ssd, KeepForBackwardKeepsNothingOnTheCpu) {
  Inputs in = make_inputs(1, 9, 2, 3, 1, 4, true, 1320);
  for (int64_t chunk : {0, 4}) {
    SsdOut a = forward(in, chunk);
    SsdOut k = ssd_forward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0, chunk,
                           /*keep_for_backward=*/true);
    EXPECT_FALSE(k.saved.defined());
    EXPECT_EQ(testing::max_abs_diff(a.y, k.y), 0.0);
    EXPECT_EQ(testing::max_abs_diff(a.final_state, k.final_state), 0.0);
  }
}

// With T = 0 the final state is the initial state, and its gradient passes straight back.
TEST(Ssd, EmptySequencePassesTheStateThrough) {
  Inputs in = make_inputs(2, 0, 4, 3, 2, 5, true, 1350);
  Tensor dy = Tensor::zeros({2, 0, 4, 3}, DType::F64), dS = randn({2, 4, 3, 5}, 1360);
  for (int64_t chunk : {0, 4}) {
    EXPECT_EQ(testing::max_abs_diff(forward(in, chunk).final_state, in.h0), 0.0);
    SsdGrads g = backward(in, dy, dS, chunk);
    EXPECT_EQ(testing::max_abs_diff(g.dinitial_state, dS), 0.0);
    EXPECT_EQ(g.dA.item(0), 0.0);
    EXPECT_EQ(g.dD.item(0), 0.0);
  }
}

// Step t of a [B,T,...] tensor as a [B,...] tensor (a copy).
Tensor at_step(const Tensor& seq, int64_t t) {
  Shape s = seq.shape();
  const int64_t batch = s[0], T = s[1];
  s.erase(s.begin() + 1);
  Tensor out = Tensor::empty(s, seq.dtype());
  const int64_t row = seq.numel() / (batch * T);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < row; ++i) out.set_item(b * row + i, seq.item((b * T + t) * row + i));
  return out;
}

// T decode steps from the initial state give the scan's outputs and final state.
TEST(Ssd, StepMatchesScan) {
  const int64_t batch = 2, T = 9, H = 4, P = 3, G = 2, N = 5;
  Inputs in = make_inputs(batch, T, H, P, G, N, true, 1400);
  SsdOut scan = forward(in, 4);
  Tensor state = in.h0.clone();
  for (int64_t t = 0; t < T; ++t) {
    Tensor y = ssd_step(at_step(in.x, t), at_step(in.dt, t), in.A, at_step(in.B, t),
                        at_step(in.C, t), in.D, state);
    EXPECT_LE(rel_rms(y, at_step(scan.y, t)), 1e-13) << "step " << t;
  }
  EXPECT_LE(rel_rms(state, scan.final_state), 1e-13);
}

TEST(Ssd, FloatMatchesDouble) {
  Inputs d = make_inputs(2, 13, 4, 3, 2, 5, true, 1500);
  Inputs f{d.x.to(DType::F32), d.dt.to(DType::F32), d.A.to(DType::F32), d.B.to(DType::F32),
           d.C.to(DType::F32),  d.D.to(DType::F32),  d.h0.to(DType::F32)};
  Tensor dy = randn({2, 13, 4, 3}, 1510), dS = randn({2, 4, 3, 5}, 1511);
  for (int64_t chunk : {0, 4}) {
    SsdOut od = forward(d, chunk), of = forward(f, chunk);
    EXPECT_LT(rel_rms(of.y, od.y), 1e-5);
    EXPECT_LT(rel_rms(of.final_state, od.final_state), 1e-5);
    SsdGrads gd = backward(d, dy, dS, chunk);
    SsdGrads gf = backward(f, dy.to(DType::F32), dS.to(DType::F32), chunk);
    EXPECT_LT(rel_rms(gf.dx, gd.dx), 1e-5);
    EXPECT_LT(rel_rms(gf.ddt, gd.ddt), 1e-5);
    EXPECT_LT(rel_rms(gf.dA, gd.dA), 1e-5);
    EXPECT_LT(rel_rms(gf.dB, gd.dB), 1e-5);
    EXPECT_LT(rel_rms(gf.dC, gd.dC), 1e-5);
    EXPECT_LT(rel_rms(gf.dD, gd.dD), 1e-5);
    EXPECT_LT(rel_rms(gf.dinitial_state, gd.dinitial_state), 1e-5);
  }
}

TEST(Ssd, BadInputsNameTheOpAndShapes) {
  Inputs in = make_inputs(2, 5, 4, 3, 2, 6, true, 1600);
  Tensor dy = randn({2, 5, 4, 3}, 1610);
  try {
    ssd_forward(in.x, randn({2, 5, 3}, 1), in.A, in.B, in.C, in.D, in.h0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "ssd_forward: argument 'dt' is f64[2,5,3]@cpu, expected shape [2,5,4]");
  }
  Tensor B3 = randn({2, 5, 3, 6}, 2);
  try {
    ssd_forward(in.x, in.dt, in.A, B3, B3, in.D, in.h0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "ssd_forward: 4 heads (x is f64[2,5,4,3]@cpu) cannot be split into 3 groups "
                 "(B is f64[2,5,3,6]@cpu)");
  }
  // C's shape must match B's; the initial state is [B,H,P,N]; dtypes agree; chunk_size >= 0.
  EXPECT_THROW(ssd_forward(in.x, in.dt, in.A, in.B, randn({2, 5, 2, 5}, 3), in.D, in.h0), Error);
  EXPECT_THROW(ssd_forward(in.x, in.dt, in.A, in.B, in.C, in.D, randn({2, 4, 6, 3}, 4)), Error);
  EXPECT_THROW(ssd_forward(in.x, in.dt.to(DType::F32), in.A, in.B, in.C, in.D, in.h0), Error);
  EXPECT_THROW(ssd_forward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0.to(DType::F32)), Error);
  EXPECT_THROW(ssd_forward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0, -1), Error);
  EXPECT_THROW(ssd_forward(in.x, in.dt, in.A, in.B, in.C, randn({3}, 5), in.h0), Error);
  EXPECT_THROW(ssd_forward(in.x.view({2, 5, 12}), in.dt, in.A, in.B, in.C, in.D, in.h0), Error);
  Tensor xi = Tensor::zeros({2, 5, 4, 3}, DType::I32);
  EXPECT_THROW(ssd_forward(xi, in.dt, in.A, in.B, in.C, in.D, in.h0), Error);
  // The backward checks the same inputs, plus dy and d_final_state.
  EXPECT_THROW(ssd_backward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0, dy.view({2, 5, 12}),
                            Tensor()),
               Error);
  EXPECT_THROW(ssd_backward(in.x, in.dt, in.A, in.B, in.C, in.D, in.h0, dy,
                            randn({2, 4, 3, 5}, 6)),
               Error);
  EXPECT_THROW(ssd_backward(in.x, in.dt, in.A, randn({5}, 7), in.C, in.D, in.h0, dy, Tensor()),
               Error);
  // The decode step: state [B,H,P,N] is required.
  Tensor x1 = randn({2, 4, 3}, 8), dt1 = uniform({2, 4}, 9, 0.1, 0.5), B1 = randn({2, 2, 6}, 10);
  EXPECT_THROW(ssd_step(x1, dt1, in.A, B1, B1, in.D, Tensor()), Error);
  EXPECT_THROW(ssd_step(x1, dt1, in.A, B1, B1, in.D, randn({2, 4, 3, 5}, 11)), Error);
  EXPECT_THROW(ssd_step(x1, dt1, in.A, randn({2, 3, 6}, 12), randn({2, 3, 6}, 12), in.D,
                        randn({2, 4, 3, 6}, 13)),
               Error);
  try {
    ssd_step(x1, dt1, in.A, B1, B1, in.D, randn({2, 4, 3, 5}, 11));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "ssd_step: argument 'state' is f64[2,4,3,5]@cpu, expected shape [2,4,3,6]");
  }
}

}  // namespace
}  // namespace amor
