// The flat unit layout (flat_unit.h): offsets, padding to a multiple of W, equal shards, and the
// per-rank segments that carry each parameter's weight-decay flag, checked element by element
// against a map built here from the parameter sizes.
#include "runner/dist/flat_unit.h"

#include <gtest/gtest.h>

#include <vector>

namespace amor::dist {
namespace {

// Two units: "a" with params of 5 (decay) and 3 (no decay) elements, "b" with one of 4 x 2.
void fill(model::ParamStore& ps) {
  ps.begin_unit("a");
  ps.add("a.w", {5}, model::init_constant(1), true);
  ps.add("a.n", {3}, model::init_constant(1), false);
  ps.begin_unit("b");
  ps.add("b.w", {4, 2}, model::init_constant(1), true);
}

TEST(FlatUnit, OffsetsPaddingAndShards) {
  model::ParamStore ps(DType::F32);
  fill(ps);
  auto units = build_flat_units(ps, 3, 1);
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].name, "a");
  EXPECT_EQ(units[0].numel, 8);
  EXPECT_EQ(units[0].padded, 9);
  EXPECT_EQ(units[0].shard_numel, 3);
  EXPECT_EQ(units[0].params[1].offset, 5);
  EXPECT_EQ(units[0].params[1].name, "a.n");
  EXPECT_EQ(units[1].params[0].shape, (Shape{4, 2}));
  EXPECT_EQ(units[1].padded, 9);
  EXPECT_EQ(units[1].shard_numel, 3);
  // Rank 1 of unit a holds elements 3..5: a.w[3..4] (decay) then a.n[0] (no decay).
  ASSERT_EQ(units[0].segments.size(), 2u);
  EXPECT_EQ(units[0].segments[0].begin, 0);
  EXPECT_EQ(units[0].segments[0].length, 2);
  EXPECT_TRUE(units[0].segments[0].weight_decay);
  EXPECT_EQ(units[0].segments[1].begin, 2);
  EXPECT_EQ(units[0].segments[1].length, 1);
  EXPECT_FALSE(units[0].segments[1].weight_decay);
}

TEST(FlatUnit, SegmentsOfAllRanksCoverEveryParameterElementOnceWithItsDecayFlag) {
  model::ParamStore ps(DType::F64);
  fill(ps);
  for (int W : {1, 2, 3, 4, 7, 16}) {
    // flag[u][j]: -1 padding, else the decay flag of flat element j, from the sizes alone.
    std::vector<std::vector<int>> flag(2);
    for (const auto& p : ps.params())
      for (int64_t i = 0; i < p->value.numel(); ++i) flag[static_cast<size_t>(p->unit)].push_back(p->weight_decay);
    std::vector<std::vector<int>> seen(2);
    for (int r = 0; r < W; ++r) {
      auto units = build_flat_units(ps, W, r);
      for (size_t u = 0; u < 2; ++u) {
        const FlatUnit& fu = units[u];
        EXPECT_EQ(fu.padded % W, 0);
        EXPECT_LT(fu.padded - fu.numel, W);
        seen[u].resize(static_cast<size_t>(fu.padded), -1);
        for (const ShardSegment& s : fu.segments)
          for (int64_t i = 0; i < s.length; ++i) {
            const int64_t j = r * fu.shard_numel + s.begin + i;
            EXPECT_EQ(seen[u][static_cast<size_t>(j)], -1) << "element " << j << " in two segments";
            seen[u][static_cast<size_t>(j)] = s.weight_decay;
          }
      }
    }
    for (size_t u = 0; u < 2; ++u) {
      flag[u].resize(seen[u].size(), -1);
      EXPECT_EQ(seen[u], flag[u]) << "W=" << W << " unit " << u;
    }
  }
}

TEST(FlatUnit, BadInputsAreNamed) {
  model::ParamStore ps(DType::F32);
  fill(ps);
  try {
    build_flat_units(ps, 2, 2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fsdp: rank 2 of world size 2 is not a rank"), std::string::npos) << e.what();
  }
  ps.params()[1]->value = Tensor();
  try {
    build_flat_units(ps, 2, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fsdp: parameter 'a.n' has no value (already sharded?)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace amor::dist
