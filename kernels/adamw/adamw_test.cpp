#include <gtest/gtest.h>

#include <cmath>

#include "kernels/adamw/adamw.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::max_abs_diff;
using testing::randn;
using testing::rel_rms;

// Step 1 from zero moments: m_hat = g and v_hat = g^2, so the Adam direction is g / (|g| + eps).
TEST(AdamW, FirstStepIsSignLikeUpdate) {
  const double lr = 0.01, wd = 0.1, eps = 1e-8;
  Tensor p = randn({5, 7}, 1), g = randn({5, 7}, 2, DType::F64, 0.3);
  Tensor p0 = p.clone();
  Tensor m = Tensor::zeros({5, 7}, DType::F64), v = Tensor::zeros({5, 7}, DType::F64);
  adamw_step(p, g, m, v, 1, lr, 0.9, 0.95, eps, wd);
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double gi = g.item(i);
    EXPECT_NEAR(p.item(i), p0.item(i) * (1 - lr * wd) - lr * gi / (std::fabs(gi) + eps), 1e-15);
    EXPECT_NEAR(m.item(i), 0.1 * gi, 1e-16);
    EXPECT_NEAR(v.item(i), 0.05 * gi * gi, 1e-16);
  }
}

// A later step with nonzero moments, against the textbook form with m_hat and v_hat.
TEST(AdamW, LaterStepMatchesTextbookFormula) {
  const double lr = 3e-3, b1 = 0.8, b2 = 0.99, eps = 1e-6, wd = 0.05;
  const int64_t step = 5;
  Tensor p = randn({23}, 3), g = randn({23}, 4), m = randn({23}, 5, DType::F64, 0.1);
  Tensor v = testing::uniform({23}, 6, 0.0, 0.2);
  Tensor p0 = p.clone(), m0 = m.clone(), v0 = v.clone();
  adamw_step(p, g, m, v, step, lr, b1, b2, eps, wd);
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double gi = g.item(i);
    const double mi = b1 * m0.item(i) + (1 - b1) * gi;
    const double vi = b2 * v0.item(i) + (1 - b2) * gi * gi;
    const double m_hat = mi / (1 - std::pow(b1, step)), v_hat = vi / (1 - std::pow(b2, step));
    const double want = p0.item(i) - lr * wd * p0.item(i) - lr * m_hat / (std::sqrt(v_hat) + eps);
    EXPECT_NEAR(p.item(i), want, 1e-14) << i;
    EXPECT_NEAR(m.item(i), mi, 1e-15) << i;
    EXPECT_NEAR(v.item(i), vi, 1e-15) << i;
  }
}

// With a zero gradient only the decoupled weight decay acts.
TEST(AdamW, ZeroGradientOnlyDecays) {
  Tensor p = randn({9}, 7), g = Tensor::zeros({9}, DType::F64);
  Tensor m = Tensor::zeros({9}, DType::F64), v = Tensor::zeros({9}, DType::F64);
  Tensor p0 = p.clone();
  adamw_step(p, g, m, v, 1, 0.1, 0.9, 0.999, 1e-8, 0.2);
  for (int64_t i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(p.item(i), p0.item(i) * (1 - 0.1 * 0.2));
}

TEST(AdamW, FloatMatchesDouble) {
  Tensor pd = randn({64}, 8), md = Tensor::zeros({64}, DType::F64), vd = Tensor::zeros({64}, DType::F64);
  Tensor pf = pd.to(DType::F32), mf = md.to(DType::F32), vf = vd.to(DType::F32);
  for (int64_t step = 1; step <= 4; ++step) {
    Tensor g = randn({64}, 100 + step);
    adamw_step(pd, g, md, vd, step, 1e-2, 0.9, 0.95, 1e-8, 0.1);
    adamw_step(pf, g.to(DType::F32), mf, vf, step, 1e-2, 0.9, 0.95, 1e-8, 0.1);
  }
  EXPECT_LT(rel_rms(pf, pd), 1e-6);
  EXPECT_LT(rel_rms(mf, md), 1e-6);
  EXPECT_LT(rel_rms(vf, vd), 1e-6);
}

// Moments in one flat buffer as disjoint slices (how FSDP may hold them) are accepted.
TEST(AdamW, DisjointSlicesOfOneBufferAreFine) {
  Tensor state = Tensor::zeros({2 * 6}, DType::F64);
  Tensor m = state.slice_flat(0, {2, 3}), v = state.slice_flat(6, {2, 3});
  Tensor p = randn({2, 3}, 9), g = randn({2, 3}, 10);
  Tensor p2 = p.clone(), m2 = Tensor::zeros({2, 3}, DType::F64), v2 = Tensor::zeros({2, 3}, DType::F64);
  adamw_step(p, g, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1);
  adamw_step(p2, g, m2, v2, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1);
  EXPECT_EQ(max_abs_diff(p, p2), 0.0);
  EXPECT_EQ(max_abs_diff(v, v2), 0.0);
}

TEST(AdamW, BadInputsNameTheOpAndShapes) {
  Tensor p = randn({4, 3}, 11), g = randn({4, 3}, 12);
  Tensor m = Tensor::zeros({4, 3}, DType::F64), v = Tensor::zeros({4, 3}, DType::F64);
  Tensor bad_m = Tensor::zeros({3, 4}, DType::F64);
  try {
    adamw_step(p, g, bad_m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "adamw_step: argument 'm' is f64[3,4]@cpu, expected shape [4,3]");
  }
  EXPECT_THROW(adamw_step(p, g, m, v, 0, 1e-3, 0.9, 0.95, 1e-8, 0.1), Error);
  EXPECT_THROW(adamw_step(p, g, m, v, 1, -1e-3, 0.9, 0.95, 1e-8, 0.1), Error);
  EXPECT_THROW(adamw_step(p, g, m, v, 1, 1e-3, 1.0, 0.95, 1e-8, 0.1), Error);
  EXPECT_THROW(adamw_step(p, g, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, -0.1), Error);
  Tensor gf = g.to(DType::F32);
  EXPECT_THROW(adamw_step(p, gf, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1), Error);
  EXPECT_THROW(adamw_step(p, g, m, m, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1), Error);
  Tensor pi = Tensor::zeros({4, 3}, DType::I32);
  EXPECT_THROW(adamw_step(pi, g, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1), Error);
}

}  // namespace
}  // namespace amor
