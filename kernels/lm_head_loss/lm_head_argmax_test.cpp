#include "kernels/lm_head_loss/lm_head_argmax.h"

#include <gtest/gtest.h>

#include "tests/common/random.h"

namespace amor {
namespace {

TEST(LmHeadArgmax, EqualsTheArgmaxOfFullLogitsForEveryChunkSize) {
  const int64_t N = 9, D = 5, V = 37;
  Tensor h = testing::randn({N, D}, 1), W = testing::randn({V, D}, 2);
  std::vector<int32_t> want(N);
  for (int64_t n = 0; n < N; ++n) {
    double best = -1e300;
    for (int64_t v = 0; v < V; ++v) {
      double z = 0;
      for (int64_t d = 0; d < D; ++d) z += h.item(n * D + d) * W.item(v * D + d);
      if (z > best) {
        best = z;
        want[static_cast<size_t>(n)] = static_cast<int32_t>(v);
      }
    }
  }
  for (int64_t chunk : {1, 4, 37, 100})
    EXPECT_EQ(lm_head_argmax(h, W, chunk).to_vector<int32_t>(), want) << "chunk " << chunk;
  EXPECT_EQ(lm_head_argmax(h.to(DType::F32), W.to(DType::F32), 8).to_vector<int32_t>(), want);
}

TEST(LmHeadArgmax, TiesGoToTheLowestIdAndBadShapesAreErrors) {
  Tensor h = Tensor::from_vector<double>({1, 2}, {1, 0});
  Tensor W = Tensor::from_vector<double>({4, 2}, {0, 1, 2, 0, 2, 5, 1, 1});  // ids 1 and 2 tie
  EXPECT_EQ(lm_head_argmax(h, W, 1).item(0), 1.0);
  EXPECT_THROW(lm_head_argmax(h, Tensor::zeros({4, 3}, DType::F64)), Error);
}

}  // namespace
}  // namespace amor
