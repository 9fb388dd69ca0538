// cast / cast_into on the cpu: conversions, the no-copy rule for equal dtypes, and the argument
// errors. (The cuda kernels are checked against these in tests/cuda/cuda_parity_test.cpp.)
#include "kernels/cast/cast.h"
#include "tests/common/error_of.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace amor {
namespace {

using amor::testing::error_of;

TEST(Cast, F32ToBf16RoundsToNearestEvenAndBack) {
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa wins (1); 1 + 3*2^-8 rounds up.
  Tensor x = Tensor::from_vector<float>({4}, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 1e30f});
  Tensor y = cast(x, DType::BF16);
  EXPECT_EQ(y.str(), "bf16[4]@cpu");
  EXPECT_EQ(y.item(0), 1.0);
  EXPECT_EQ(y.item(1), 1.0 + 4 * 0x1p-8);
  EXPECT_EQ(y.item(2), -2.5);
  Tensor back = cast(y, DType::F32);
  EXPECT_EQ(back.str(), "f32[4]@cpu");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back.item(i), y.item(i));
}

TEST(Cast, SameDtypeIsTheSameTensor) {
  Tensor x = Tensor::from_vector<float>({2}, {1.0f, 2.0f});
  EXPECT_TRUE(cast(x, DType::F32).same_storage(x));
}

TEST(Cast, IntoAnExistingTensor) {
  Tensor x = Tensor::from_vector<float>({3}, {0.5f, -1.25f, 3.0f});
  Tensor buf = Tensor::empty({5}, DType::BF16);
  Tensor dst = buf.slice_flat(2, {3});
  cast_into(x, dst);
  EXPECT_EQ(buf.item(2), 0.5);
  EXPECT_EQ(buf.item(3), -1.25);
  EXPECT_EQ(buf.item(4), 3.0);
  cast_into(dst, dst);  // the same tensor: nothing to do
  EXPECT_EQ(buf.item(4), 3.0);
}

TEST(Cast, IntoChecksShapeAndOverlap) {
  Tensor x = Tensor::from_vector<float>({3}, {1, 2, 3});
  Tensor wrong = Tensor::empty({4}, DType::BF16);
  EXPECT_EQ(error_of([&] { cast_into(x, wrong); }),
            "cast_into: src f32[3]@cpu and dst bf16[4]@cpu must have one shape and one device");
  Tensor flat = Tensor::empty({4}, DType::F32);
  Tensor a = flat.slice_flat(0, {2}), b = flat.slice_flat(1, {2});
  EXPECT_EQ(error_of([&] { cast_into(a, b); }),
            "cast_into: src f32[2]@cpu and dst f32[2]@cpu overlap in memory");
  Tensor undefined;
  EXPECT_EQ(error_of([&] { cast(undefined, DType::F32); }), "cast: argument 'x' is undefined");
}

TEST(Cast, NanStaysNan) {
  Tensor x = Tensor::from_vector<float>({1}, {std::numeric_limits<float>::quiet_NaN()});
  EXPECT_TRUE(std::isnan(cast(x, DType::BF16).item(0)));
}

}  // namespace
}  // namespace amor
