#include "kernels/rope/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;

// Dh = 10 (Dh/2 = 5 frequencies), T = 5, H = 3: no power-of-two sizes.
TEST(Rope, GradcheckDoubleOffsets) {
  for (int64_t offset : {int64_t(0), int64_t(5000)}) {
    SCOPED_TRACE(::testing::Message() << "offset=" << offset);
    Tensor x = randn({2, 5, 3, 10}, 1), dy = randn({2, 5, 3, 10}, 2);
    Tensor dx = rope_backward(dy, offset);
    auto reports = gradcheck([&] { return std::vector<Tensor>{rope_forward(x, offset)}; }, {dy},
                             {{"x", x, dx}});
    for (auto& r : reports)
      RecordProperty("x_offset" + std::to_string(offset), fmt::format("{:.2e}", r.error));
  }
}

TEST(Rope, GradcheckDoubleExplicitPositionsAndBase) {
  Tensor pos_t = Tensor::from_vector<int64_t>({4}, {7, 0, 3, 1234});
  Tensor pos_bt = Tensor::from_vector<int64_t>({2, 4}, {0, 1, 2, 3, 0, 1, 0, 1});
  for (const Tensor& pos : {pos_t, pos_bt}) {
    Tensor x = randn({2, 4, 2, 6}, 3), dy = randn({2, 4, 2, 6}, 4);
    Tensor dx = rope_backward_positions(dy, pos, 500.0);
    gradcheck([&] { return std::vector<Tensor>{rope_forward_positions(x, pos, 500.0)}; }, {dy},
              {{"x", x, dx}});
  }
}

TEST(Rope, PositionZeroIsIdentityAndBackwardInvertsForward) {
  Tensor x = randn({1, 3, 2, 8}, 5);
  Tensor at0 = rope_forward_positions(x, Tensor::zeros({3}, DType::I64));
  EXPECT_EQ(testing::max_abs_diff(at0, x), 0.0);
  Tensor back = rope_backward(rope_forward(x, 77), 77);
  EXPECT_LT(testing::max_abs_diff(back, x), 1e-14);
}

TEST(Rope, OffsetEqualsExplicitPositions) {
  Tensor x = randn({2, 5, 3, 8}, 6);
  Tensor pos = Tensor::from_vector<int64_t>({5}, {40, 41, 42, 43, 44});
  EXPECT_EQ(testing::max_abs_diff(rope_forward(x, 40), rope_forward_positions(x, pos)), 0.0);
  EXPECT_EQ(testing::max_abs_diff(rope_backward(x, 40), rope_backward_positions(x, pos)), 0.0);
}

// A decode step's rotation at each sequence's cache length (lengths i32 [B]: token t of sequence
// b at lengths[b] + t) is exactly the explicit positions' (and the offset's when they agree), in
// f64 and f32; bad lengths are refused.
TEST(Rope, LengthsEqualExplicitPositions) {
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor x = randn({3, 2, 2, 10}, 9).to(dt);
    Tensor lengths = Tensor::from_vector<int32_t>({3}, {0, 17, 5000});
    Tensor pos = Tensor::from_vector<int64_t>({3, 2}, {0, 1, 17, 18, 5000, 5001});
    EXPECT_EQ(testing::max_abs_diff(rope_forward_lengths(x, lengths), rope_forward_positions(x, pos)), 0.0);
    EXPECT_EQ(testing::max_abs_diff(rope_forward_lengths(x, lengths, 500.0),
                                    rope_forward_positions(x, pos, 500.0)), 0.0);
    Tensor same = Tensor::from_vector<int32_t>({3}, {40, 40, 40});
    EXPECT_EQ(testing::max_abs_diff(rope_forward_lengths(x, same), rope_forward(x, 40)), 0.0);
  }
  Tensor x = Tensor::zeros({2, 1, 3, 8}, DType::F32);
  EXPECT_THROW(rope_forward_lengths(x, Tensor::from_vector<int32_t>({2}, {0, -1})), Error);
  EXPECT_THROW(rope_forward_lengths(x, Tensor::zeros({3}, DType::I32)), Error);
  EXPECT_THROW(rope_forward_lengths(x, Tensor::zeros({2}, DType::I64)), Error);
}

// The point of RoPE: <rope(q, m), rope(k, n)> depends only on m - n.
TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  const int64_t dh = 12;
  Tensor qk = randn({1, 2, 1, dh}, 7);  // token 0 is q, token 1 is k
  auto dot_at = [&](int64_t m, int64_t n) {
    Tensor r = rope_forward_positions(qk, Tensor::from_vector<int64_t>({2}, {m, n}));
    double s = 0;
    for (int64_t j = 0; j < dh; ++j) s += r.item(j) * r.item(dh + j);
    return s;
  };
  EXPECT_NEAR(dot_at(9, 4), dot_at(1005, 1000), 1e-11);
  EXPECT_NEAR(dot_at(3, 3), dot_at(0, 0), 1e-12);
  EXPECT_GT(std::abs(dot_at(9, 4) - dot_at(4, 9)), 1e-6);  // and it is not symmetric in m - n
}

// Float keeps the accuracy of double at large positions because the angles are taken in double.
TEST(Rope, FloatMatchesDoubleAtLargePositions) {
  Tensor x = randn({1, 6, 2, 64}, 8);
  Tensor yd = rope_forward(x, 5000), yf = rope_forward(x.to(DType::F32), 5000);
  EXPECT_LT(testing::rel_rms(yf, yd), 1e-6);
  EXPECT_LT(testing::rel_rms(rope_backward(x.to(DType::F32), 5000), rope_backward(x, 5000)), 1e-6);
}

TEST(Rope, BadInputsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({2, 5, 3, 8}, DType::F32);
  try {
    rope_forward(Tensor::zeros({2, 5, 7}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rope_forward: argument 'x' is f32[2,5,7]@cpu, expected 4 dimensions");
  }
  try {
    rope_forward_positions(x, Tensor::zeros({4}, DType::I64));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "rope_forward_positions: argument 'positions' is i64[4]@cpu, expected shape [5]");
  }
  EXPECT_THROW(rope_forward(Tensor::zeros({2, 5, 3, 7}, DType::F32)), Error);
  EXPECT_THROW(rope_backward(Tensor::zeros({2, 5, 3, 7}, DType::F64)), Error);
  EXPECT_THROW(rope_forward(x, -1), Error);
  EXPECT_THROW(rope_forward(x, 0, 0.0), Error);
  EXPECT_THROW(rope_forward(Tensor::zeros({2, 5, 3, 8}, DType::I32)), Error);
  EXPECT_THROW(rope_forward_positions(x, Tensor::zeros({5}, DType::I32)), Error);
  EXPECT_THROW(rope_forward_positions(x, Tensor::zeros({3, 5}, DType::I64)), Error);
  EXPECT_THROW(rope_backward_positions(x, Tensor::from_vector<int64_t>({5}, {0, 1, -2, 3, 4})),
               Error);
}

}  // namespace
}  // namespace amor
