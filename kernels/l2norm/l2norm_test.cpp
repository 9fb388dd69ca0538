#include "kernels/l2norm/l2norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;

TEST(L2Norm, GradcheckDouble) {
  for (double eps : {1e-6, 0.5}) {  // the large eps makes the eps term matter in the gradient
    SCOPED_TRACE(::testing::Message() << "eps=" << eps);
    Tensor x = randn({2, 3, 4, 7}, 1, DType::F64, 0.6), dy = randn({2, 3, 4, 7}, 2);
    L2NormOut out = l2norm_forward(x, eps);
    Tensor dx = l2norm_backward(x, out.rstd, dy);
    auto reports = gradcheck([&] { return std::vector<Tensor>{l2norm_forward(x, eps).y}; }, {dy},
                             {{"x", x, dx}});
    for (auto& r : reports)
      RecordProperty(fmt::format("x_eps{:g}", eps), fmt::format("{:.2e}", r.error));
  }
}

TEST(L2Norm, RowsHaveUnitNormWhenEpsIsZero) {
  Tensor x = randn({5, 13}, 3);
  L2NormOut out = l2norm_forward(x, 0.0);
  ASSERT_EQ(out.rstd.shape(), (Shape{5}));
  for (int64_t r = 0; r < 5; ++r) {
    double ss = 0, xs = 0;
    for (int64_t j = 0; j < 13; ++j) {
      ss += out.y.item(r * 13 + j) * out.y.item(r * 13 + j);
      xs += x.item(r * 13 + j) * x.item(r * 13 + j);
    }
    EXPECT_NEAR(ss, 1.0, 1e-14);
    EXPECT_NEAR(out.rstd.item(r), 1.0 / std::sqrt(xs), 1e-14);
  }
}

TEST(L2Norm, FloatMatchesDouble) {
  Tensor x = randn({6, 64}, 4), dy = randn({6, 64}, 5);
  L2NormOut od = l2norm_forward(x);
  Tensor dxd = l2norm_backward(x, od.rstd, dy);
  L2NormOut of = l2norm_forward(x.to(DType::F32));
  Tensor dxf = l2norm_backward(x.to(DType::F32), of.rstd, dy.to(DType::F32));
  EXPECT_LT(testing::rel_rms(of.y, od.y), 1e-6);
  EXPECT_LT(testing::rel_rms(dxf, dxd), 1e-6);
}

TEST(L2Norm, BadInputsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({3, 4, 8}, DType::F32);
  try {
    l2norm_backward(x, Tensor::zeros({3, 4}, DType::F32), x);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "l2norm_backward: argument 'rstd' is f32[3,4]@cpu, expected shape [12]");
  }
  EXPECT_THROW(
      l2norm_backward(x, Tensor::zeros({12}, DType::F32), Tensor::zeros({3, 4, 7}, DType::F32)),
      Error);
  EXPECT_THROW(l2norm_backward(x, Tensor::zeros({12}, DType::F64), x), Error);
  EXPECT_THROW(l2norm_forward(x, -1e-6), Error);
  EXPECT_THROW(l2norm_forward(Tensor::zeros({3, 0}, DType::F32)), Error);
  EXPECT_THROW(l2norm_forward(Tensor::zeros({3, 4}, DType::I64)), Error);
  EXPECT_THROW(l2norm_forward(Tensor()), Error);
}

}  // namespace
}  // namespace amor
