// The one rule for dealing a global micro-batch over ranks (data/loader/rank_split.h) and every
// place that deals one: the token-stream source (DataLoader), the example source (MQAR etc.) and
// dist::rank_slice. Each must give rank r of W, at micro-batch b, exactly rows [r*b, (r+1)*b) of
// what one rank at micro-batch W*b gets, sample ids included, step after step (across epoch ends).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/loader/rank_split.h"
#include "data/shards/shard_files.h"
#include "data/shards/shard_writer.h"
#include "data/shards/test_tmpdir.h"
#include "runner/dist/rank_batch.h"
#include "runner/train/batch_source.h"

namespace amor {
namespace {

TEST(RankSplit, RanksHoldContiguousBlocksInRankOrder) {
  for (int W : {1, 2, 3, 4, 7})
    for (int64_t b : {1, 2, 5}) {
      std::vector<int64_t> rows;  // rank 0's rows, then rank 1's, ...
      for (int r = 0; r < W; ++r) {
        const data::RankSplit s(b, r, W);
        EXPECT_EQ(s.per_rank(), b);
        EXPECT_EQ(s.global_size(), W * b);
        EXPECT_EQ(s.first(), r * b);
        for (int64_t j = 0; j < b; ++j) rows.push_back(s.global_row(j));
      }
      // Concatenated in rank order the ranks' rows are the global batch, each row once, in order.
      ASSERT_EQ(static_cast<int64_t>(rows.size()), W * b);
      for (int64_t i = 0; i < W * b; ++i) EXPECT_EQ(rows[static_cast<size_t>(i)], i) << "W " << W << " b " << b;
      EXPECT_EQ(data::RankSplit::of_global(W * b, W - 1, W).first(), (W - 1) * b);
    }
}

TEST(RankSplit, RefusesWhatDoesNotSplit) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { data::RankSplit::of_global(10, 0, 3); }).find("10 sequences does not split over 3 ranks"),
            std::string::npos);
  EXPECT_NE(message([] { data::RankSplit(2, 3, 3); }).find("rank 3 of world size 3 is not a rank"), std::string::npos);
  EXPECT_NE(message([] { data::RankSplit(2, 0, 0); }).find("rank 0 of world size 0"), std::string::npos);
  EXPECT_NE(message([] { data::RankSplit(-1, 0, 1); }).find("-1 sequences per rank"), std::string::npos);
}

// Rows of a [B, T] i32 tensor (and its i64 sample ids) as vectors, for comparing batches.
std::vector<int32_t> row(const Tensor& t, int64_t i) {
  const int64_t T = t.size(1);
  return std::vector<int32_t>(t.data<int32_t>() + i * T, t.data<int32_t>() + (i + 1) * T);
}

// Rank r's batches from make(b, r, W) against one rank's from make(W*b, 0, 1), and against
// rank_slice of that one-rank batch.
template <class Make>
void expect_sources_follow_the_rule(Make make, int W, int64_t b, int steps, const std::string& what) {
  auto one = make(W * b, 0, 1);
  std::vector<std::unique_ptr<BatchSource>> ranks;
  for (int r = 0; r < W; ++r) ranks.push_back(make(b, r, W));
  for (int s = 0; s < steps; ++s) {
    const model::Batch g = one->next();
    ASSERT_EQ(g.tokens.size(0), W * b);
    for (int r = 0; r < W; ++r) {
      const model::Batch mine = ranks[static_cast<size_t>(r)]->next();
      const model::Batch sliced = dist::rank_slice(g, r, W);
      const data::RankSplit split(b, r, W);
      ASSERT_EQ(mine.tokens.size(0), b) << what;
      for (int64_t j = 0; j < b; ++j) {
        const int64_t gj = split.global_row(j);
        EXPECT_EQ(row(mine.tokens, j), row(g.tokens, gj)) << what << " step " << s << " rank " << r << " row " << j;
        EXPECT_EQ(row(mine.targets, j), row(g.targets, gj)) << what << " step " << s << " rank " << r;
        EXPECT_EQ(mine.sample_ids.data<int64_t>()[j], g.sample_ids.data<int64_t>()[gj]) << what << " step " << s;
        EXPECT_EQ(row(sliced.tokens, j), row(mine.tokens, j)) << what << " rank_slice, step " << s;
        EXPECT_EQ(sliced.sample_ids.data<int64_t>()[j], mine.sample_ids.data<int64_t>()[j]) << what;
      }
      EXPECT_EQ(ranks[static_cast<size_t>(r)]->position(), one->position()) << what;
    }
  }
}

TEST(RankSplit, EveryDataSourceAndRankSliceFollowIt) {
  // Examples: 23 rows of 4 tokens, each row distinct; 23 is no multiple of a global batch, so
  // the steps run through several shuffled epochs (a partial global batch is dropped).
  const int64_t n = 23, T = 4;
  std::vector<int32_t> tok, tgt;
  for (int64_t i = 0; i < n * T; ++i) {
    tok.push_back(static_cast<int32_t>(i));
    tgt.push_back(static_cast<int32_t>(i % 5 == 0 ? -100 : i + 1));
  }
  synthetic::TokenTask task{Tensor::from_vector<int32_t>({n, T}, tok), Tensor::from_vector<int32_t>({n, T}, tgt)};
  for (int W : {2, 3})
    expect_sources_follow_the_rule(
        [&](int64_t mb, int r, int w) { return example_source(task, mb, r, w, /*seed=*/5, /*shuffle=*/true); },
        W, 2, 12, "example source W=" + std::to_string(W));

  // A token stream: one shard of documents; its sequences are not a multiple of a global batch,
  // so batches straddle epochs.
  amor::testing::TempDir t("rank_split_stream");
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 9; ++d) {
    std::vector<int32_t> doc;
    for (int i = 0; i < 5 + (d * 7) % 13; ++i) doc.push_back((d * 31 + i) % 90);
    docs.push_back(doc);
  }
  shards::write_shard(t / shards::shard_file_name("train", 0), {"test", 100, 99}, docs);
  for (int W : {2, 4})
    expect_sources_follow_the_rule(
        [&](int64_t mb, int r, int w) {
          return stream_source(data::TokenDataset::open(t.str()), /*seq_len=*/6, mb, r, w, /*seed=*/9, /*shuffle=*/true);
        },
        W, 2, 10, "stream source W=" + std::to_string(W));
}

}  // namespace
}  // namespace amor
