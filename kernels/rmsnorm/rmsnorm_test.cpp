#include "kernels/rmsnorm/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;

TEST(RMSNorm, GradcheckDouble) {
  Tensor x = randn({3, 5, 7}, 1, DType::F64, 1.5), w = randn({7}, 2);
  Tensor dy = randn({3, 5, 7}, 3);
  const double eps = 1e-5;
  RMSNormOut out = rmsnorm_forward(x, w, eps);
  RMSNormGrads g = rmsnorm_backward(x, w, out.rstd, dy);
  auto reports = gradcheck([&] { return std::vector<Tensor>{rmsnorm_forward(x, w, eps).y}; }, {dy},
                           {{"x", x, g.dx}, {"w", w, g.dw}});
  for (auto& r : reports) RecordProperty(r.name, fmt::format("{:.2e}", r.error));
}

// A large eps makes the eps term matter in the gradient, not only in the forward.
TEST(RMSNorm, GradcheckDoubleLargeEps) {
  Tensor x = randn({4, 9}, 4, DType::F64, 0.3), w = randn({9}, 5);
  Tensor dy = randn({4, 9}, 6);
  RMSNormOut out = rmsnorm_forward(x, w, 0.5);
  RMSNormGrads g = rmsnorm_backward(x, w, out.rstd, dy);
  gradcheck([&] { return std::vector<Tensor>{rmsnorm_forward(x, w, 0.5).y}; }, {dy},
            {{"x", x, g.dx}, {"w", w, g.dw}});
}

TEST(RMSNorm, RstdIsPerRowReciprocalRms) {
  Tensor x = randn({2, 3, 11}, 7), w = randn({11}, 8);
  RMSNormOut out = rmsnorm_forward(x, w, 1e-6);
  ASSERT_EQ(out.rstd.shape(), (Shape{6}));
  for (int64_t r = 0; r < 6; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < 11; ++j) ss += x.item(r * 11 + j) * x.item(r * 11 + j);
    EXPECT_NEAR(out.rstd.item(r), 1.0 / std::sqrt(ss / 11 + 1e-6), 1e-14);
  }
}

TEST(RMSNorm, FloatMatchesDouble) {
  Tensor x = randn({8, 33}, 9), w = randn({33}, 10), dy = randn({8, 33}, 11);
  RMSNormOut od = rmsnorm_forward(x, w, 1e-5);
  RMSNormGrads gd = rmsnorm_backward(x, w, od.rstd, dy);
  Tensor xf = x.to(DType::F32), wf = w.to(DType::F32);
  RMSNormOut of = rmsnorm_forward(xf, wf, 1e-5);
  RMSNormGrads gf = rmsnorm_backward(xf, wf, of.rstd, dy.to(DType::F32));
  EXPECT_LT(testing::rel_rms(of.y, od.y), 1e-6);
  EXPECT_LT(testing::rel_rms(gf.dx, gd.dx), 1e-6);
  EXPECT_LT(testing::rel_rms(gf.dw, gd.dw), 1e-6);
}

TEST(RMSNorm, BadInputsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({8, 64}, DType::F32);
  try {
    rmsnorm_forward(x, Tensor::zeros({63}, DType::F32), 1e-5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rmsnorm_forward: argument 'w' is f32[63]@cpu, expected shape [64]");
  }
  Tensor w = Tensor::zeros({64}, DType::F32);
  try {
    rmsnorm_backward(x, w, Tensor::zeros({4}, DType::F32), x);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rmsnorm_backward: argument 'rstd' is f32[4]@cpu, expected shape [8]");
  }
  EXPECT_THROW(
      rmsnorm_backward(x, w, Tensor::zeros({8}, DType::F32), Tensor::zeros({8, 63}, DType::F32)),
      Error);
  EXPECT_THROW(rmsnorm_backward(x, w, Tensor::zeros({8}, DType::F64), x), Error);
  EXPECT_THROW(rmsnorm_forward(x, Tensor::zeros({64}, DType::F64), 1e-5), Error);
  EXPECT_THROW(rmsnorm_forward(x, w, -1.0), Error);
  EXPECT_THROW(
      rmsnorm_forward(Tensor::zeros({8, 0}, DType::F32), Tensor::zeros({0}, DType::F32), 1e-5),
      Error);
  EXPECT_THROW(
      rmsnorm_forward(Tensor::zeros({8, 64}, DType::I32), Tensor::zeros({64}, DType::I32), 1e-5),
      Error);
}

}  // namespace
}  // namespace amor
