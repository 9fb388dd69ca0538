#include <gtest/gtest.h>

#include "kernels/elementwise/elementwise.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;

TEST(Elementwise, AddMulScale) {
  Tensor a = randn({5, 3}, 1), b = randn({5, 3}, 2);
  Tensor s = add(a, b), p = mul(a, b), c = scale(a, -2.0);
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_EQ(s.item(i), a.item(i) + b.item(i));
    EXPECT_EQ(p.item(i), a.item(i) * b.item(i));
    EXPECT_EQ(c.item(i), -2.0 * a.item(i));
  }
  Tensor acc = a.clone();
  add_(acc, b, 0.5);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(acc.item(i), a.item(i) + 0.5 * b.item(i));
}

// Mixed precision on the cpu: an f64 accumulator takes f32 addends exactly (every f32 is an f64);
// the reverse pair, or mismatched shapes, is refused.
TEST(Elementwise, AddIntoWiderAccumulator) {
  Tensor acc = randn({4, 3}, 11, DType::F64), b = randn({4, 3}, 12, DType::F32);
  Tensor before = acc.clone();
  add_(acc, b, -0.25);
  for (int64_t i = 0; i < acc.numel(); ++i) EXPECT_EQ(acc.item(i), before.item(i) - 0.25 * b.item(i));
  Tensor narrow = randn({4, 3}, 13, DType::F32);
  EXPECT_THROW(add_(narrow, acc), Error);
  EXPECT_THROW(add_(acc, randn({3, 4}, 14, DType::F32)), Error);
}

TEST(Elementwise, GradcheckActivations) {
  Tensor x = randn({4, 7}, 3, DType::F64, 3.0), w = randn({4, 7}, 4);
  Tensor y = sigmoid_forward(x);
  gradcheck([&] { return std::vector<Tensor>{sigmoid_forward(x)}; }, {w},
            {{"x", x, sigmoid_backward(y, w)}});
  gradcheck([&] { return std::vector<Tensor>{silu_forward(x)}; }, {w}, {{"x", x, silu_backward(x, w)}});
}

TEST(Elementwise, GradcheckBiasSoftplusAndChannelScale) {
  Tensor x = randn({2, 5, 6}, 5, DType::F64, 4.0), bias = randn({6}, 6), w = randn({2, 5, 6}, 7);
  BiasSoftplusGrads g = bias_softplus_backward(x, bias, w);
  gradcheck([&] { return std::vector<Tensor>{bias_softplus_forward(x, bias)}; }, {w},
            {{"x", x, g.dx}, {"bias", bias, g.dbias}});
  Tensor s = randn({6}, 8);
  ChannelScaleGrads c = channel_scale_backward(x, s, w);
  gradcheck([&] { return std::vector<Tensor>{channel_scale_forward(x, s)}; }, {w},
            {{"x", x, c.dx}, {"s", s, c.ds}});
}

TEST(Elementwise, SoftplusDoesNotOverflow) {
  Tensor x = Tensor::from_vector<float>({3}, {-1000.f, 0.f, 1000.f});
  Tensor y = bias_softplus_forward(x, Tensor::zeros({3}, DType::F32));
  EXPECT_EQ(y.item(0), 0.0);
  EXPECT_NEAR(y.item(1), std::log(2.0), 1e-7);
  EXPECT_EQ(y.item(2), 1000.0);
}

// channel_scale_add gives add(h, channel_scale_forward(x, s))'s bits (the product rounded to the
// dtype before the add), a hand-computed case, and errors naming the op and argument.
TEST(Elementwise, ChannelScaleAdd) {
  for (DType dt : {DType::F64, DType::F32}) {  // the cpu computes in these (bf16: the GPU test)
    const Tensor h = randn({6, 5}, 21).to(dt), x = randn({6, 5}, 22).to(dt), s = randn({5}, 23).to(dt);
    const Tensor y = channel_scale_add(h, x, s), want = add(h, channel_scale_forward(x, s));
    ASSERT_EQ(y.shape(), h.shape());
    ASSERT_EQ(y.dtype(), dt);
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.item(i), want.item(i)) << dtype_name(dt) << " " << i;
  }
  const Tensor h = Tensor::from_vector<double>({2, 2}, {1, 2, 3, 4});
  const Tensor x = Tensor::from_vector<double>({2, 2}, {10, 20, 30, 40});
  const Tensor y = channel_scale_add(h, x, Tensor::from_vector<double>({2}, {0.5, -1}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{6, -18, 18, -36}));
  try {
    channel_scale_add(Tensor::zeros({2, 3}, DType::F32), Tensor::zeros({3, 2}, DType::F32),
                      Tensor::zeros({2}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channel_scale_add: argument 'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(channel_scale_add(Tensor::zeros({2, 3}, DType::F32), Tensor::zeros({2, 3}, DType::F32),
                                 Tensor::zeros({2}, DType::F32)),
               Error);
  EXPECT_THROW(channel_scale_add(Tensor::zeros({2, 3}, DType::F64), Tensor::zeros({2, 3}, DType::F32),
                                 Tensor::zeros({3}, DType::F32)),
               Error);
}

TEST(Elementwise, BadInputs) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32);
  try {
    bias_softplus_forward(a, Tensor::zeros({2}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bias_softplus_forward: argument 'bias' is f32[2]@cpu, expected shape [3]");
  }
  EXPECT_THROW(add(a, Tensor::zeros({3, 2}, DType::F32)), Error);
  EXPECT_THROW(mul(a, Tensor::zeros({2, 3}, DType::F64)), Error);
}

}  // namespace
}  // namespace amor
