#include <gtest/gtest.h>

#include "kernels/swiglu/swiglu.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;

TEST(Swiglu, GradcheckDouble) {
  Tensor g = randn({3, 7, 5}, 1, DType::F64, 2.0);
  Tensor u = randn({3, 7, 5}, 2);
  Tensor w = randn({3, 7, 5}, 3);  // dL/dh
  SwigluGrads grads = swiglu_backward(g, u, w);
  gradcheck([&] { return std::vector<Tensor>{swiglu_forward(g, u)}; }, {w},
            {{"g", g, grads.dg}, {"u", u, grads.du}});
}

TEST(Swiglu, FloatMatchesDouble) {
  Tensor g = randn({64}, 4), u = randn({64}, 5);
  Tensor hd = swiglu_forward(g, u);
  Tensor hf = swiglu_forward(g.to(DType::F32), u.to(DType::F32));
  EXPECT_LT(testing::rel_rms(hf, hd), 1e-6);
}

TEST(Swiglu, BadInputsNameTheOpAndShapes) {
  Tensor g = Tensor::zeros({2, 3}, DType::F32);
  Tensor u = Tensor::zeros({2, 4}, DType::F32);
  try {
    swiglu_forward(g, u);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "swiglu_forward: argument 'u' is f32[2,4]@cpu, expected shape [2,3]");
  }
  EXPECT_THROW(swiglu_forward(g, Tensor::zeros({2, 3}, DType::F64)), Error);
  EXPECT_THROW(swiglu_forward(Tensor::zeros({2}, DType::I32), Tensor::zeros({2}, DType::I32)), Error);
}

}  // namespace
}  // namespace amor
