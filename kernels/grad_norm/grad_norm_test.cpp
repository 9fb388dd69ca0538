#include <gtest/gtest.h>

#include <cmath>

#include "kernels/grad_norm/grad_norm.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::randn;

std::vector<Tensor> some_grads(DType dt, double scale) {
  return {randn({3, 5}, 1, dt, scale), randn({7}, 2, dt, scale), randn({2, 2, 3}, 3, dt, scale)};
}

// Straight from the definition: every element squared, in one flat loop.
double direct_norm(const std::vector<Tensor>& grads) {
  double s = 0;
  for (const Tensor& g : grads)
    for (int64_t i = 0; i < g.numel(); ++i) s += g.item(i) * g.item(i);
  return std::sqrt(s);
}

TEST(GradNorm, KnownNorm) {
  // A 3-4-5 triangle split over two tensors, and an empty list.
  std::vector<Tensor> g{Tensor::from_vector<double>({1}, {3.0}), Tensor::from_vector<float>({1}, {4.0f})};
  EXPECT_EQ(global_grad_norm(g), 5.0);
  EXPECT_EQ(sum_of_squares(g), 25.0);
  EXPECT_EQ(global_grad_norm({}), 0.0);
}

// FSDP: the sum of squares over shards adds up to the norm of the whole.
TEST(GradNorm, ShardsSumToTheWhole) {
  std::vector<Tensor> g = some_grads(DType::F64, 1.0);
  double parts = sum_of_squares({g[0]}) + sum_of_squares({g[1], g[2]});
  EXPECT_NEAR(std::sqrt(parts), global_grad_norm(g), 1e-14);
  EXPECT_NEAR(global_grad_norm(g), direct_norm(g), 1e-13);
}

TEST(GradNorm, ClipsToMaxNorm) {
  for (DType dt : {DType::F64, DType::F32}) {
    std::vector<Tensor> g = some_grads(dt, 2.0);
    std::vector<Tensor> before;
    for (const Tensor& t : g) before.push_back(t.clone());
    const double total = clip_grad_norm(g, 1.0);
    EXPECT_NEAR(total, direct_norm(before), 1e-12 * total);
    const double coef = 1.0 / (total + 1e-6);
    EXPECT_NEAR(global_grad_norm(g), total * coef, dt == DType::F64 ? 1e-14 : 1e-6);
    for (size_t k = 0; k < g.size(); ++k)
      for (int64_t i = 0; i < g[k].numel(); ++i)
        EXPECT_NEAR(g[k].item(i), before[k].item(i) * coef, dt == DType::F64 ? 1e-15 : 1e-7);
  }
}

TEST(GradNorm, BelowMaxNormLeavesGradsUntouched) {
  std::vector<Tensor> g = some_grads(DType::F32, 0.01);
  std::vector<Tensor> before;
  for (const Tensor& t : g) before.push_back(t.clone());
  const double total = clip_grad_norm(g, 10.0);
  EXPECT_LT(total, 10.0);
  for (size_t k = 0; k < g.size(); ++k) EXPECT_EQ(testing::max_abs_diff(g[k], before[k]), 0.0);
  EXPECT_EQ(clip_coefficient(total, 10.0), 1.0);
}

TEST(GradNorm, BadInputsNameTheOp) {
  std::vector<Tensor> g{randn({2}, 4), Tensor::zeros({3}, DType::I32)};
  try {
    global_grad_norm(g);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "sum_of_squares: argument 'grads[1]' is i32[3]@cpu, expected a floating dtype");
  }
  std::vector<Tensor> ok{randn({2}, 5)};
  EXPECT_THROW(clip_grad_norm(ok, 0.0), Error);
  EXPECT_THROW(clip_grad_norm(g, 1.0), Error);
  std::vector<Tensor> undefined{Tensor()};
  EXPECT_THROW(sum_of_squares(undefined), Error);
  std::vector<Tensor> bf{Tensor::zeros({2}, DType::BF16)};
  EXPECT_THROW(scale_grads(bf, 0.5), Error);
}

}  // namespace
}  // namespace amor
