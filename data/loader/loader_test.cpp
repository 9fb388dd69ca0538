// The loader: packing into seq_len + 1 windows across shard boundaries, determinism for a seed,
// each epoch a permutation, the rank split (W ranks x b == 1 rank x W*b), resume from a saved
// position with nothing repeated or skipped, and the bad-input errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "data/loader/data_loader.h"
#include "data/loader/permutation.h"
#include "data/shards/shard_files.h"
#include "data/shards/shard_writer.h"
#include "data/shards/test_tmpdir.h"
#include "kernels/core/error.h"

namespace amor::data {
namespace {

using amor::testing::TempDir;

constexpr uint32_t kVocab = 1000, kEos = 999;

template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an amor::Error mentioning '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// A dataset folder of three train shards of documents with varied lengths; `stream` receives the
// token stream the shards must read as (documents then EOS, shard after shard).
std::string make_dataset(const TempDir& t, std::vector<int32_t>& stream) {
  int32_t next = 0;
  for (int shard = 0; shard < 3; ++shard) {
    std::vector<std::vector<int32_t>> docs;
    for (int d = 0; d < 4 + shard; ++d) {
      std::vector<int32_t> doc;
      for (int i = 0; i < 3 + (d * 7 + shard * 5) % 11; ++i) doc.push_back(next++ % 900);
      docs.push_back(doc);
      stream.insert(stream.end(), doc.begin(), doc.end());
      stream.push_back(static_cast<int32_t>(kEos));
    }
    shards::write_shard(t / shards::shard_file_name("train", static_cast<size_t>(shard)), {"test", kVocab, kEos}, docs);
  }
  return t.str();
}

LoaderOptions opts(int64_t seq_len, int64_t batch, int rank = 0, int world = 1, uint64_t seed = 7, bool shuffle = true) {
  LoaderOptions o;
  o.seq_len = seq_len;
  o.batch_size = batch;
  o.rank = rank;
  o.world = world;
  o.seed = seed;
  o.shuffle = shuffle;
  return o;
}

std::vector<uint64_t> run_sequences(DataLoader& l, int steps) {
  std::vector<uint64_t> seqs;
  for (int s = 0; s < steps; ++s) {
    Batch b = l.next();
    seqs.insert(seqs.end(), b.sequences.begin(), b.sequences.end());
  }
  return seqs;
}

TEST(Permutation, IsAPermutationAndDependsOnlyOnTheSeed) {
  for (uint64_t n : {1ull, 2ull, 17ull, 1000ull}) {
    std::vector<uint32_t> p = seeded_permutation(n, 42);
    std::vector<uint32_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
    EXPECT_EQ(p, seeded_permutation(n, 42));
  }
  EXPECT_NE(seeded_permutation(1000, 1), seeded_permutation(1000, 2));
  // Roughly uniform: over many seeds, element 0 lands in each of 4 slots about equally often.
  std::vector<int> where(4, 0);
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    auto p = seeded_permutation(4, seed);
    where[static_cast<size_t>(std::find(p.begin(), p.end(), 0u) - p.begin())]++;
  }
  for (int c : where) EXPECT_NEAR(c, 1000, 120);
}

TEST(Loader, PacksTheStreamIntoOverlappingWindowsAcrossShards) {
  TempDir t("loader_pack");
  std::vector<int32_t> stream;
  DataLoader l(TokenDataset::open(make_dataset(t, stream)), opts(16, 1, 0, 1, 0, /*shuffle=*/false));
  ASSERT_EQ(l.dataset().num_shards(), 3u);
  ASSERT_EQ(l.dataset().size(), stream.size());
  const uint64_t S = (stream.size() - 1) / 16;
  EXPECT_EQ(l.num_sequences(), S);
  for (uint64_t k = 0; k < S; ++k) {
    Batch b = l.next();
    ASSERT_EQ(b.tokens.shape(), (Shape{1, 16}));
    ASSERT_EQ(b.tokens.dtype(), DType::I32);
    std::vector<int32_t> in(stream.begin() + static_cast<ptrdiff_t>(16 * k), stream.begin() + static_cast<ptrdiff_t>(16 * k + 16));
    std::vector<int32_t> tg(stream.begin() + static_cast<ptrdiff_t>(16 * k + 1), stream.begin() + static_cast<ptrdiff_t>(16 * k + 17));
    EXPECT_EQ(b.tokens.to_vector<int32_t>(), in) << "sequence " << k;
    EXPECT_EQ(b.targets.to_vector<int32_t>(), tg) << "sequence " << k;
    EXPECT_EQ(b.sequences, std::vector<uint64_t>{k});
  }
  // After the last sequence the next epoch starts again at sequence 0 (stream order).
  EXPECT_EQ(l.position(), (LoaderPosition{1, 0}));
  EXPECT_EQ(l.next().sequences, std::vector<uint64_t>{0});
}

TEST(Loader, DeterministicForASeedAndEachEpochVisitsEverySequenceOnce) {
  TempDir t("loader_det");
  std::vector<int32_t> stream;
  std::string dir = make_dataset(t, stream);
  DataLoader a(TokenDataset::open(dir), opts(8, 3, 0, 1, 11));
  DataLoader b(TokenDataset::open(dir), opts(8, 3, 0, 1, 11));
  DataLoader c(TokenDataset::open(dir), opts(8, 3, 0, 1, 12));
  const uint64_t S = a.num_sequences();
  int steps = static_cast<int>(3 * S / 3 + 2);  // three epochs and a bit
  std::vector<uint64_t> sa = run_sequences(a, steps), sb = run_sequences(b, steps), sc = run_sequences(c, steps);
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  for (int e = 0; e < 3; ++e) {
    std::vector<uint64_t> epoch(sa.begin() + static_cast<ptrdiff_t>(e * S), sa.begin() + static_cast<ptrdiff_t>((e + 1) * S));
    std::vector<uint64_t> expect(S);
    std::iota(expect.begin(), expect.end(), uint64_t{0});
    EXPECT_NE(epoch, expect) << "epoch " << e << " not shuffled";
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(epoch, expect) << "epoch " << e << " is not a permutation of the sequences";
  }
  std::vector<uint64_t> e0(sa.begin(), sa.begin() + static_cast<ptrdiff_t>(S)), e1(sa.begin() + static_cast<ptrdiff_t>(S), sa.begin() + static_cast<ptrdiff_t>(2 * S));
  EXPECT_NE(e0, e1) << "every epoch has the same order";
}

TEST(Loader, BatchesHoldTheSequencesTheyName) {
  TempDir t("loader_rows");
  std::vector<int32_t> stream;
  DataLoader l(TokenDataset::open(make_dataset(t, stream)), opts(10, 4, 1, 3, 5));
  for (int step = 0; step < 5; ++step) {
    Batch b = l.next();
    auto tok = b.tokens.to_vector<int32_t>(), tgt = b.targets.to_vector<int32_t>();
    for (size_t j = 0; j < 4; ++j) {
      uint64_t k = b.sequences[j];
      for (size_t i = 0; i < 10; ++i) {
        ASSERT_EQ(tok[j * 10 + i], stream[k * 10 + i]);
        ASSERT_EQ(tgt[j * 10 + i], stream[k * 10 + i + 1]);
      }
    }
  }
}

TEST(Loader, RanksTogetherReadWhatOneRankWithTheWholeBatchReads) {
  TempDir t("loader_ranks");
  std::vector<int32_t> stream;
  std::string dir = make_dataset(t, stream);
  const int W = 3, b = 2, steps = 9;  // 6 per global batch; S is not a multiple, so batches straddle epochs
  DataLoader single(TokenDataset::open(dir), opts(6, W * b, 0, 1, 99));
  ASSERT_NE(single.num_sequences() % (W * b), 0u);
  std::vector<DataLoader> ranks;
  for (int r = 0; r < W; ++r) ranks.emplace_back(TokenDataset::open(dir), opts(6, b, r, W, 99));
  for (int s = 0; s < steps; ++s) {
    Batch one = single.next();
    auto one_tok = one.tokens.to_vector<int32_t>();
    for (int r = 0; r < W; ++r) {
      Batch mine = ranks[static_cast<size_t>(r)].next();
      auto tok = mine.tokens.to_vector<int32_t>();
      for (int j = 0; j < b; ++j) {
        size_t g = static_cast<size_t>(r * b + j);  // rank_split.h: row j of rank r = global element r*b + j
        EXPECT_EQ(mine.sequences[static_cast<size_t>(j)], one.sequences[g]) << "step " << s << " rank " << r;
        EXPECT_TRUE(std::equal(tok.begin() + j * 6, tok.begin() + (j + 1) * 6, one_tok.begin() + static_cast<ptrdiff_t>(g * 6)));
      }
      EXPECT_EQ(ranks[static_cast<size_t>(r)].position(), single.position());  // every rank agrees
    }
  }
}

TEST(Loader, ResumeContinuesWithNothingRepeatedOrSkipped) {
  TempDir t("loader_resume");
  std::vector<int32_t> stream;
  std::string dir = make_dataset(t, stream);
  const int W = 2, b = 3, total = 20;
  for (int r = 0; r < W; ++r) {
    DataLoader whole(TokenDataset::open(dir), opts(7, b, r, W, 3));
    std::vector<Batch> expect;
    for (int s = 0; s < total; ++s) expect.push_back(whole.next());
    ASSERT_GT(expect.back().start.epoch, 1u) << "the test should cross epoch boundaries";
    for (int cut : {1, 7, 13}) {
      DataLoader before(TokenDataset::open(dir), opts(7, b, r, W, 3));
      for (int s = 0; s < cut; ++s) before.next();
      LoaderPosition saved = before.position();  // what a checkpoint stores
      DataLoader after(TokenDataset::open(dir), opts(7, b, r, W, 3));
      after.set_position(saved);
      for (int s = cut; s < total; ++s) {
        Batch got = after.next();
        const Batch& want = expect[static_cast<size_t>(s)];
        ASSERT_EQ(got.start, want.start) << "cut " << cut << " step " << s;
        ASSERT_EQ(got.sequences, want.sequences) << "cut " << cut << " step " << s;
        ASSERT_EQ(got.tokens.to_vector<int32_t>(), want.tokens.to_vector<int32_t>());
        ASSERT_EQ(got.targets.to_vector<int32_t>(), want.targets.to_vector<int32_t>());
      }
    }
  }
}

TEST(Loader, SingleShardFileAndValidSplit) {
  TempDir t("loader_file");
  shards::write_shard(t / "valid-00000.tok", {"test", kVocab, kEos}, {{1, 2, 3, 4, 5, 6, 7, 8, 9}});
  DataLoader l(TokenDataset::open(t.str(), "valid"), opts(4, 2, 0, 1, 0, false));
  EXPECT_EQ(l.num_sequences(), 2u);  // 10 tokens: windows [0,5) and [4,9)
  Batch b = l.next();
  EXPECT_EQ(b.tokens.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(b.targets.to_vector<int32_t>(), (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 9}));
  DataLoader f(TokenDataset::open(t / "valid-00000.tok"), opts(9, 1, 0, 1, 0, false));
  EXPECT_EQ(f.num_sequences(), 1u);
  EXPECT_EQ(f.next().targets.to_vector<int32_t>().back(), static_cast<int32_t>(kEos));
}

TEST(Loader, BadInputs) {
  TempDir t("loader_bad");
  std::vector<int32_t> stream;
  std::string dir = make_dataset(t, stream);
  expect_error([&] { TokenDataset::open(dir, "train", 500); },
               {"train-00000.tok", "tokenizer 'test' has a vocabulary of 1000 but the model's vocab_size is 500"});
  EXPECT_NO_THROW(TokenDataset::open(dir, "train", 1000));
  expect_error([&] { TokenDataset::open(dir, "valid"); }, {dir, "no 'valid' shards (valid-00000.tok)"});
  expect_error([&] { TokenDataset::open(t / "nowhere"); }, {"nowhere: no such token shard or dataset folder"});
  expect_error([&] { DataLoader(TokenDataset::open(dir), opts(100000, 1)); },
               {dir, "tokens make no sequence of seq_len + 1 = 100001 tokens"});
  expect_error([&] { DataLoader(TokenDataset::open(dir), opts(8, 0)); }, {"batch_size must be positive"});
  expect_error([&] { DataLoader(TokenDataset::open(dir), opts(8, 1, 2, 2)); }, {"rank 2 of world 2"});
  DataLoader l(TokenDataset::open(dir), opts(8, 1));
  expect_error([&] { l.set_position({0, l.num_sequences()}); },
               {"cannot resume at sequence", fmt::format("packs into {} sequences of 8 tokens", l.num_sequences())});
  // Shards from different tokenizers in one split.
  shards::write_shard(t / "train-00003.tok", {"other", 2000, 1999}, {{1}});
  expect_error([&] { TokenDataset::open(dir); }, {"train-00003.tok: tokenizer 'other'", "differs from"});
  // A corrupted id is caught when a batch reads it.
  TempDir u("loader_corrupt");
  shards::write_shard(u / "train-00000.tok", {"test", kVocab, kEos}, {{1, 2, 3, 4, 5, 6}});
  std::string bytes = amor::testing::read_file(u / "train-00000.tok");
  bytes[shards::kHeaderBytes + 2 * 2] = static_cast<char>(0xff);  // token 2 -> 0x..ff >= 1000
  bytes[shards::kHeaderBytes + 2 * 2 + 1] = static_cast<char>(0xff);
  u.write("train-00000.tok", bytes);
  DataLoader c(TokenDataset::open(u.str()), opts(6, 1, 0, 1, 0, false));
  expect_error([&] { c.next(); }, {"train-00000.tok: corrupted token shard: token 2 has id 65535"});
}

}  // namespace
}  // namespace amor::data
