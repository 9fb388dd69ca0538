// Oryx's training modes depend on each sequence's sample id only: a batch of 4 draws the same
// modes as the same sequences split into two batches of 2 (two ranks, or two micro-batches).
#include <gtest/gtest.h>

#include "models/lm/language_model.h"
#include "tests/common/random.h"

namespace amor::model {
namespace {

TEST(SampleIds, OryxModesFollowTheSequenceNotTheBatch) {
  ModelConfig c;
  c.kind = "oryx";
  c.vocab = 11;
  c.d_model = 8;
  c.head_dim = 4;
  c.n_layers = 1;
  c.gdn.head_dim = 4;
  c.oryx.chunk = 2;
  auto model = build_model(c, DType::F64);
  model->params().initialize(1);
  Tensor tokens = testing::randint({4, 12}, 2, c.vocab);
  Tensor ids = Tensor::from_vector<int64_t>({4}, {40, 41, 42, 43});
  Tensor all = model->forward({tokens, tokens, ids}, true).modes;
  Tensor first = model->forward({tokens.slice_flat(0, {2, 12}), tokens.slice_flat(0, {2, 12}),
                                 ids.slice_flat(0, {2})}, true).modes;
  Tensor second = model->forward({tokens.slice_flat(24, {2, 12}), tokens.slice_flat(24, {2, 12}),
                                  ids.slice_flat(2, {2})}, true).modes;
  int attention = 0;
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(all.item(i), first.item(i));
    EXPECT_EQ(all.item(24 + i), second.item(i));
    attention += static_cast<int>(all.item(i));
  }
  EXPECT_GT(attention, 0);
  EXPECT_LT(attention, 24);
  EXPECT_THROW(model->forward({tokens, tokens, Tensor::zeros({3}, DType::I64)}, true), Error);
}

}  // namespace
}  // namespace amor::model
