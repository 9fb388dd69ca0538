#include "kernels/embedding/embedding.h"

#include <gtest/gtest.h>

#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randint;
using testing::randn;

TEST(Embedding, GradcheckWeightDouble) {
  // 23 ids drawn from 5 rows: most rows repeat, so the scatter-add accumulation is exercised.
  Tensor ids = randint({23}, 1, 5);
  Tensor weight = randn({5, 7}, 2);
  Tensor dy = randn({23, 7}, 3);
  Tensor dw = embedding_backward(ids, dy, 5);
  auto reports = gradcheck([&] { return std::vector<Tensor>{embedding_forward(ids, weight)}; },
                           {dy}, {{"weight", weight, dw}});
  for (auto& r : reports) RecordProperty(r.name, fmt::format("{:.2e}", r.error));
}

TEST(Embedding, OutputShapeFollowsIdsAndRowsAreCopied) {
  Tensor ids = randint({2, 3}, 4, 11);
  Tensor weight = randn({11, 6}, 5, DType::F32);
  Tensor y = embedding_forward(ids, weight);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 6}));
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(y.item(n * 6 + j), weight.item(int64_t(ids.item(n)) * 6 + j));
}

TEST(Embedding, RepeatedIdsAccumulateAndUnusedRowsAreZero) {
  Tensor ids = Tensor::from_vector<int32_t>({4}, {2, 0, 2, 2});
  Tensor dy = randn({4, 3}, 6);
  Tensor dw = embedding_backward(ids, dy, 4);
  EXPECT_EQ(dw.shape(), (Shape{4, 3}));
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_DOUBLE_EQ(dw.item(0 * 3 + j), dy.item(1 * 3 + j));
    EXPECT_DOUBLE_EQ(dw.item(2 * 3 + j),
                     dy.item(0 * 3 + j) + dy.item(2 * 3 + j) + dy.item(3 * 3 + j));
    EXPECT_EQ(dw.item(1 * 3 + j), 0.0);
    EXPECT_EQ(dw.item(3 * 3 + j), 0.0);
  }
}

TEST(Embedding, BadInputsNameTheOpAndShapes) {
  Tensor weight = Tensor::zeros({50, 8}, DType::F32);
  Tensor ids = Tensor::from_vector<int32_t>({2, 2}, {1, 2, 3, 70});
  try {
    embedding_forward(ids, weight);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "embedding_forward: id 70 at position 3 of ids i32[2,2]@cpu is out of range for "
                 "vocabulary size V=50");
  }
  try {
    embedding_backward(Tensor::from_vector<int32_t>({3}, {0, 1, 2}),
                       Tensor::zeros({3, 4, 8}, DType::F32), 50);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "embedding_backward: argument 'dy' is f32[3,4,8]@cpu, expected shape [3,*]");
  }
  Tensor neg = Tensor::from_vector<int32_t>({2}, {0, -1});
  EXPECT_THROW(embedding_forward(neg, weight), Error);
  EXPECT_THROW(embedding_backward(neg, Tensor::zeros({2, 8}, DType::F32), 50), Error);
  EXPECT_THROW(embedding_backward(Tensor::from_vector<int32_t>({1}, {50}),
                                  Tensor::zeros({1, 8}, DType::F32), 50),
               Error);
  EXPECT_THROW(embedding_forward(Tensor::zeros({2}, DType::I64), weight), Error);
  EXPECT_THROW(embedding_forward(Tensor::zeros({2}, DType::I32), Tensor::zeros({50}, DType::F32)),
               Error);
  EXPECT_THROW(embedding_forward(Tensor::zeros({2}, DType::I32), Tensor::zeros({5, 8}, DType::I32)),
               Error);
  EXPECT_THROW(
      embedding_backward(Tensor::zeros({2}, DType::I32), Tensor::zeros({2, 8}, DType::F32), 0),
      Error);
}

}  // namespace
}  // namespace amor
