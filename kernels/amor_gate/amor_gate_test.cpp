// The gate ops on the cpu (the reference the CUDA kernels are held to, tests/cuda/
// parity_amor_gate_test.cpp): median and std against a full sort and the textbook formula, the EMA
// step in both modes, the mask's strict comparison, and the argument checks. (Target
// amor_gate_op_test: models/amor/amor_gate_test.cpp is the model-level amor_gate_test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/amor_gate/amor_gate.h"
#include "kernels/core/error.h"
#include "tests/common/error_of.h"

namespace amor {
namespace {

using amor::testing::error_of;

// n values in [0, 1] drawn from `levels` distinct values (ties when levels < n).
std::vector<float> entropies(int64_t n, int levels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, levels - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(pick(rng)) / static_cast<float>(levels);
  return v;
}

TEST(AmorGateOp, MedianIsTheLowerMiddleOfTheSortedValues) {
  for (int64_t n : {1, 2, 3, 4, 7, 10, 1001, 4096}) {
    for (int levels : {3, 1000000}) {
      std::vector<float> v = entropies(n, levels, static_cast<uint32_t>(n * 7 + levels));
      std::vector<float> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      for (DType dt : {DType::F32, DType::F64}) {
        Tensor x = Tensor::from_vector<float>({n}, v).to(dt);
        Tensor st = amor_entropy_stats(x);
        EXPECT_EQ(st.item(0), static_cast<double>(sorted[static_cast<size_t>((n - 1) / 2)]))
            << "n " << n << " levels " << levels;
      }
    }
  }
  // Even count: the lower of the two middle values, never their mean (torch.median).
  EXPECT_EQ(amor_entropy_stats(Tensor::from_vector<double>({4}, {0.4, 0.1, 0.3, 0.2})).item(0), 0.2);
}

TEST(AmorGateOp, StdIsUnbiasedAndNaNBelowTwoValues) {
  Tensor x = Tensor::from_vector<double>({4}, {1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(amor_entropy_stats(x).item(1), std::sqrt(5.0 / 3.0));
  EXPECT_TRUE(std::isnan(amor_entropy_stats(Tensor::from_vector<float>({1}, {0.5f})).item(1)));
  EXPECT_EQ(amor_entropy_stats(Tensor::from_vector<float>({1}, {0.5f})).item(0), 0.5);
  // Any shape: every element counts.
  Tensor m = Tensor::from_vector<float>({2, 3}, {0.6f, 0.1f, 0.5f, 0.2f, 0.4f, 0.3f});
  EXPECT_EQ(amor_entropy_stats(m).item(0), static_cast<double>(0.3f));
}

TEST(AmorGateOp, UpdateIsOneEmaStep) {
  const AmorGateRule adaptive{true, 1.5, 0.9, 0.0}, fixed{false, 1.5, 0.9, 0.05};
  Tensor stats = Tensor::from_vector<double>({2}, {0.5, 0.2});
  Tensor a = amor_gate_update(amor_gate_state(0.3, 0.1, adaptive), stats, adaptive);
  const double m = 0.9 * 0.3 + (1 - 0.9) * 0.5, s = 0.9 * 0.1 + (1 - 0.9) * 0.2;
  EXPECT_EQ(a.item(0), m);
  EXPECT_EQ(a.item(1), s);
  EXPECT_EQ(a.item(2), m + 1.5 * s);
  // Fixed mode never moves s; a NaN std (one value) leaves s as it was in adaptive mode.
  Tensor f = amor_gate_update(amor_gate_state(0.3, 0.1, fixed), stats, fixed);
  EXPECT_EQ(f.item(1), 0.1);
  EXPECT_EQ(f.item(2), m + 0.05);
  Tensor nan_stats = Tensor::from_vector<double>({2}, {0.5, std::nan("")});
  Tensor k = amor_gate_update(amor_gate_state(0.3, 0.1, adaptive), nan_stats, adaptive);
  EXPECT_EQ(k.item(0), m);
  EXPECT_EQ(k.item(1), 0.1);
  // The input state is not touched (callers keep it as the threshold an earlier forward used).
  Tensor before = amor_gate_state(0.3, 0.1, adaptive);
  amor_gate_update(before, stats, adaptive);
  EXPECT_EQ(before.item(0), 0.3);
}

TEST(AmorGateOp, MaskFiresStrictlyAboveTau) {
  Tensor state = Tensor::from_vector<double>({3}, {0, 0, 0.5});
  Tensor H = Tensor::from_vector<float>({2, 2}, {0.25f, 0.5f, 0.75f, 0.5000001f});
  Tensor g = amor_gate_mask(H, state);
  EXPECT_EQ(g.shape(), (Shape{2, 2}));
  EXPECT_EQ(g.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 1}));
}

TEST(AmorGateOp, ArgumentErrorsNameOpAndArgument) {
  Tensor state = amor_gate_state(0.3, 0.1, {});
  EXPECT_NE(error_of([] { amor_entropy_stats(Tensor::empty({0}, DType::F32)); }).find("amor_entropy_stats: argument 'values'"),
            std::string::npos);
  EXPECT_NE(error_of([] { amor_entropy_stats(Tensor::zeros({3}, DType::I32)); }).find("must be f32 or f64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { amor_gate_update(state, Tensor::zeros({3}, DType::F64), {}); })
                .find("amor_gate_update: argument 'stats'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { amor_gate_mask(Tensor::zeros({2}, DType::F32), Tensor::zeros({2}, DType::F64)); })
                .find("amor_gate_mask: argument 'state'"),
            std::string::npos);
}

}  // namespace
}  // namespace amor
