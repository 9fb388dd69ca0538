#include "kernels/lm_head_loss/lm_head_argmax.h"

#include <gtest/gtest.h>

#include <algorithm>

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

// Excluded ids are never chosen: the argmax over the rest (brute force over the full logits),
// for every chunk size, including chunks whose ids are all excluded; ties among the rest go to
// the lowest id left; bad ids are errors.
TEST(LmHeadArgmax, ExcludedIdsAreSkipped) {
  const int64_t N = 9, D = 5, V = 37;
  Tensor h = testing::randn({N, D}, 3), W = testing::randn({V, D}, 4);
  const std::vector<int32_t> plain = lm_head_argmax(h, W, 8).to_vector<int32_t>();
  // Every row's own argmax, ids 0..7 (a whole chunk of 8, and of 4 twice), and a repeat.
  std::vector<int32_t> excluded(plain.begin(), plain.end());
  for (int32_t v = 0; v < 8; ++v) excluded.push_back(v);
  excluded.push_back(plain[0]);
  std::vector<int32_t> want(N);
  for (int64_t n = 0; n < N; ++n) {
    double best = -1e300;
    for (int64_t v = 0; v < V; ++v) {
      if (std::find(excluded.begin(), excluded.end(), v) != excluded.end()) continue;
      double z = 0;
      for (int64_t d = 0; d < D; ++d) z += h.item(n * D + d) * W.item(v * D + d);
      if (z > best) {
        best = z;
        want[static_cast<size_t>(n)] = static_cast<int32_t>(v);
      }
    }
    EXPECT_NE(want[static_cast<size_t>(n)], plain[static_cast<size_t>(n)]);
  }
  for (int64_t chunk : {1, 4, 8, 37, 100})
    EXPECT_EQ(lm_head_argmax(h, W, chunk, excluded).to_vector<int32_t>(), want) << "chunk " << chunk;
  EXPECT_EQ(lm_head_argmax(h.to(DType::F32), W.to(DType::F32), 8, excluded).to_vector<int32_t>(), want);
  // No exclusions: the plain argmax.
  EXPECT_EQ(lm_head_argmax(h, W, 8, std::vector<int32_t>{}).to_vector<int32_t>(), plain);

  // Ties: W = 0, every logit 0; excluding 0 and 1 leaves 2 as the lowest id.
  Tensor W0 = Tensor::zeros({V, D}, DType::F64);
  EXPECT_EQ(lm_head_argmax(h, W0, 4, std::vector<int32_t>{0, 1}).item(0), 2.0);
  EXPECT_EQ(lm_head_argmax(h, W0, 1, std::vector<int32_t>{1, 0}).item(5), 2.0);

  EXPECT_THROW(lm_head_argmax(h, W, 8, std::vector<int32_t>{37}), Error);
  EXPECT_THROW(lm_head_argmax(h, W, 8, std::vector<int32_t>{-1}), Error);
  std::vector<int32_t> all(V);
  for (int32_t v = 0; v < V; ++v) all[static_cast<size_t>(v)] = v;
  EXPECT_THROW(lm_head_argmax(h, W, 8, all), Error);
  all.pop_back();  // one id left: always it
  EXPECT_EQ(lm_head_argmax(h, W, 8, all).to_vector<int32_t>(), std::vector<int32_t>(N, V - 1));
}

// A prepared exclusion (what a CUDA graph of a decode step captures) chooses what the span does;
// its ids are sorted without repeats, so that sets given in any order compare equal; it is tied
// to its vocabulary and device.
TEST(LmHeadArgmax, PreparedExclusionEqualsTheSpan) {
  const int64_t N = 6, D = 4, V = 23;
  Tensor h = testing::randn({N, D}, 5), W = testing::randn({V, D}, 6);
  const std::vector<int32_t> plain = lm_head_argmax(h, W, 5).to_vector<int32_t>();
  std::vector<int32_t> excluded = {plain[3], 7, plain[0], 7, 22};
  const ArgmaxExclusion prepared(excluded, V, Device::CPU);
  std::vector<int32_t> want = {7, 22, plain[0], plain[3]};
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  EXPECT_EQ(prepared.ids, want);
  EXPECT_FALSE(prepared.device_ids.defined());  // nothing to upload on the cpu
  for (int64_t chunk : {1, 5, 100})
    EXPECT_EQ(lm_head_argmax(h, W, chunk, prepared).to_vector<int32_t>(),
              lm_head_argmax(h, W, chunk, excluded).to_vector<int32_t>())
        << "chunk " << chunk;
  EXPECT_EQ(lm_head_argmax(h, W, 5, ArgmaxExclusion()).to_vector<int32_t>(), plain);
  EXPECT_TRUE(ArgmaxExclusion(std::vector<int32_t>{}, V, Device::CPU).empty());
  // Made for another vocabulary: refused (its ids were checked against that one).
  EXPECT_THROW(lm_head_argmax(h, testing::randn({V + 1, D}, 7), 5, prepared), Error);
  EXPECT_THROW(ArgmaxExclusion(std::vector<int32_t>{V}, V, Device::CPU), Error);
}

}  // namespace
}  // namespace amor
