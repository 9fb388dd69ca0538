#include "kernels/router_mlp/router_mlp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/core/error.h"
#include "tests/common/random.h"

namespace amor {
namespace {

double silu(double a) { return a / (1 + std::exp(-a)); }

// Two rows, d 3, W 2, values picked by hand: y = b2 + x.u + sum_j w2_j SiLU(b1_j + x.W1_j).
TEST(RouterMlp, HandComputedRows) {
  const Tensor x = Tensor::from_vector<double>({2, 3}, {1, 2, -1, 0.5, 0, 3});
  const Tensor w1 = Tensor::from_vector<double>({2, 3}, {0.1, -0.2, 0.3, 1, 0.5, -0.25});
  const Tensor b1 = Tensor::from_vector<double>({2}, {0.05, -1});
  const Tensor w2 = Tensor::from_vector<double>({1, 2}, {2, -0.5});
  const Tensor u = Tensor::from_vector<double>({1, 3}, {0.25, 0, 1});
  const Tensor b2 = Tensor::from_vector<double>({1}, {0.125});
  const Tensor y = router_mlp_forward(x, w1, b1, w2, u, b2);
  ASSERT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y.dtype(), DType::F64);
  // row 0: a0 = 0.05 + 0.1 - 0.4 - 0.3 = -0.55, a1 = -1 + 1 + 1 + 0.25 = 1.25, x.u = 0.25 - 1
  EXPECT_NEAR(y.item(0), 0.125 - 0.75 + 2 * silu(-0.55) - 0.5 * silu(1.25), 1e-15);
  // row 1: a0 = 0.05 + 0.05 + 0.9 = 1.0, a1 = -1 + 0.5 - 0.75 = -1.25, x.u = 0.125 + 3
  EXPECT_NEAR(y.item(1), 0.125 + 3.125 + 2 * silu(1.0) - 0.5 * silu(-1.25), 1e-15);
}

// f32 parameters and x give the f64 computation's value rounded once (the reference sums in
// double whatever the dtype).
TEST(RouterMlp, F32EqualsF64OnTheSameValues) {
  const int64_t n = 5, d = 40, W = 24;
  const Tensor x = testing::randn({n, d}, 1).to(DType::F32), w1 = testing::randn({W, d}, 2).to(DType::F32);
  const Tensor b1 = testing::randn({W}, 3).to(DType::F32), w2 = testing::randn({W}, 4).to(DType::F32);
  const Tensor u = testing::randn({d}, 5).to(DType::F32), b2 = testing::randn({1}, 6).to(DType::F32);
  const Tensor y32 = router_mlp_forward(x, w1, b1, w2, u, b2);
  auto f64 = [](const Tensor& t) { return t.to(DType::F64); };
  const Tensor y64 = router_mlp_forward(f64(x), f64(w1), f64(b1), f64(w2), f64(u), f64(b2));
  EXPECT_EQ(y32.dtype(), DType::F32);
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(y32.item(r), static_cast<double>(static_cast<float>(y64.item(r)))) << r;
}

TEST(RouterMlp, BadArgumentsNameTheArgument) {
  const Tensor x = testing::randn({2, 4}, 1), w1 = testing::randn({3, 4}, 2), b1 = testing::randn({3}, 3);
  const Tensor w2 = testing::randn({3}, 4), u = testing::randn({4}, 5), b2 = testing::randn({1}, 6);
  auto expect_error = [](auto f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error([&] { router_mlp_forward(x, testing::randn({3, 5}, 7), b1, w2, u, b2); }, "w1 is");
  expect_error([&] { router_mlp_forward(x, w1, testing::randn({2}, 7), w2, u, b2); }, "must hold W = 3");
  expect_error([&] { router_mlp_forward(x, w1, b1, w2, testing::randn({5}, 7), b2); }, "u ");
  expect_error([&] { router_mlp_forward(x, w1, b1, w2, u, testing::randn({2}, 7)); }, "b2 ");
  expect_error([&] { router_mlp_forward(x, w1.to(DType::F32), b1, w2, u, b2); }, "w1 is");
  expect_error([&] { router_mlp_forward(x.view({8}), w1, b1, w2, u, b2); }, "x");
}

}  // namespace
}  // namespace amor
