// Token shard format: write/read round trips at both widths, atomic writes, and every way a shard
// can be wrong (magic, version, width, truncated, trailing bytes, bad fields, corrupted ids).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "data/shards/shard_format.h"
#include "data/shards/shard_reader.h"
#include "data/shards/shard_writer.h"
#include "data/shards/test_tmpdir.h"
#include "kernels/core/error.h"

namespace amor::shards {
namespace {

using amor::testing::TempDir;
namespace fs = std::filesystem;

// Expects fn to throw amor::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an amor::Error mentioning '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

std::vector<int32_t> read_all(const TokenShard& s) {
  std::vector<int32_t> v(s.size());
  s.read(0, s.size(), v.data());
  return v;
}

// The stream a shard of these documents must hold: each document, then EOS.
std::vector<int32_t> with_eos(const std::vector<std::vector<int32_t>>& docs, int32_t eos) {
  std::vector<int32_t> v;
  for (const auto& d : docs) {
    v.insert(v.end(), d.begin(), d.end());
    v.push_back(eos);
  }
  return v;
}

// Little-endian field patching for the bad-header cases (offsets from shard_format.h's table).
void patch_u32(std::string& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}

TEST(ShardFormat, WidthFollowsVocabulary) {
  EXPECT_EQ(token_bytes_for_vocab(257), 2u);
  EXPECT_EQ(token_bytes_for_vocab(65536), 2u);  // ids 0..65535 fit 16 bits
  EXPECT_EQ(token_bytes_for_vocab(65537), 4u);
  EXPECT_EQ(token_bytes_for_vocab(128256), 4u);
}

TEST(ShardFormat, HeaderBytesAreTheDocumentedLayout) {
  ShardHeader h;
  h.token_bytes = 4;
  h.token_count = 0x0102030405ull;
  h.vocab_size = 128256;
  h.eos_id = 128001;
  h.document_count = 7;
  h.tokenizer = "llama3";
  std::string b = encode_header(h);
  ASSERT_EQ(b.size(), kHeaderBytes);
  EXPECT_EQ(std::memcmp(b.data(), "AMORTOK\0", 8), 0);
  EXPECT_EQ(static_cast<unsigned char>(b[8]), 1);    // version, little-endian
  EXPECT_EQ(static_cast<unsigned char>(b[12]), 4);   // width
  EXPECT_EQ(static_cast<unsigned char>(b[16]), 0x05);  // count's low byte first
  EXPECT_EQ(static_cast<unsigned char>(b[20]), 0x01);
  EXPECT_EQ(std::string(b.data() + 64), "llama3");
  ShardHeader back = decode_header(b, kHeaderBytes + h.token_count * 4, "x.tok");
  EXPECT_EQ(back.token_count, h.token_count);
  EXPECT_EQ(back.vocab_size, h.vocab_size);
  EXPECT_EQ(back.eos_id, h.eos_id);
  EXPECT_EQ(back.document_count, h.document_count);
  EXPECT_EQ(back.tokenizer, "llama3");
}

TEST(ShardFormat, RoundTripTwoByteTokens) {
  TempDir dir("shard_rt2");
  std::vector<std::vector<int32_t>> docs = {{1, 2, 3}, {}, {135, 0, 298}, {42}};
  std::string path = dir / "train-00000.tok";
  write_shard(path, {"byte", 300, 299}, docs);
  TokenShard s(path);
  EXPECT_EQ(s.header().token_bytes, 2u);
  EXPECT_EQ(s.header().tokenizer, "byte");
  EXPECT_EQ(s.header().vocab_size, 300u);
  EXPECT_EQ(s.header().eos_id, 299u);
  EXPECT_EQ(s.header().document_count, 4u);
  EXPECT_EQ(read_all(s), with_eos(docs, 299));
  EXPECT_EQ(fs::file_size(path), kHeaderBytes + 2 * s.size());
  int32_t mid[2];
  s.read(2, 2, mid);  // a range inside the file
  EXPECT_EQ(mid[0], 3);
  EXPECT_EQ(mid[1], 299);
}

TEST(ShardFormat, RoundTripFourByteTokens) {
  TempDir dir("shard_rt4");
  std::vector<std::vector<int32_t>> docs = {{128000, 70000, 65536, 65535, 0}, {128255}};
  std::string path = dir / "valid-00000.tok";
  write_shard(path, {"llama3", 128256, 128001}, docs);
  TokenShard s(path);
  EXPECT_EQ(s.header().token_bytes, 4u);
  EXPECT_EQ(read_all(s), with_eos(docs, 128001));
  EXPECT_EQ(fs::file_size(path), kHeaderBytes + 4 * s.size());
}

TEST(ShardFormat, EosInsideADocumentCountsAsASeparator) {
  TempDir dir("shard_eos");
  write_shard(dir / "a.tok", {"byte", 10, 9}, {{1, 9, 2}});
  EXPECT_EQ(TokenShard(dir / "a.tok").header().document_count, 2u);
}

TEST(ShardWriter, NothingUnderTheRealNameUntilCommitAndNothingLeftIfAbandoned) {
  TempDir dir("shard_atomic");
  std::string path = dir / "train-00000.tok";
  {
    ShardWriter w(path, {"byte", 259, 256});
    w.add_document(std::vector<int32_t>{1, 2, 3});
    w.finish();
    EXPECT_FALSE(fs::exists(path));
  }  // destroyed without commit: as if the conversion failed
  EXPECT_TRUE(fs::is_empty(dir.str())) << "temporary file left behind";
  {
    ShardWriter w(path, {"byte", 259, 256});
    w.add_document(std::vector<int32_t>{1, 2, 3});
    w.commit();
  }
  EXPECT_TRUE(fs::exists(path));
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir.str())) files += (void(e), 1);
  EXPECT_EQ(files, 1u);
}

TEST(ShardWriter, RejectsIdsOutsideTheVocabularyAndKeepsTheShardConsistent) {
  TempDir dir("shard_badid");
  std::string path = dir / "a.tok";
  ShardWriter w(path, {"byte", 259, 256});
  w.add_document(std::vector<int32_t>{5});
  expect_error([&] { w.add_document(std::vector<int32_t>{7, 259}); }, {path, "token id 259", "vocabulary of 259"});
  expect_error([&] { w.add_document(std::vector<int32_t>{-1}); }, {"token id -1"});
  w.commit();
  TokenShard s(path);
  EXPECT_EQ(read_all(s), (std::vector<int32_t>{5, 256}));  // the rejected document left no trace
  EXPECT_EQ(s.header().document_count, 1u);
}

TEST(ShardWriter, RejectsImpossibleInfo) {
  TempDir dir("shard_info");
  expect_error([&] { ShardWriter(dir / "a.tok", {"byte", 259, 259}); }, {"EOS id 259", "outside the vocabulary"});
  expect_error([&] { ShardWriter(dir / "a.tok", {"byte", 0, 0}); }, {"vocabulary size 0"});
  expect_error([&] { ShardWriter(dir / "a.tok", {std::string(64, 'x'), 10, 0}); }, {"longer than 63 bytes"});
  EXPECT_TRUE(fs::is_empty(dir.str()));
}

// A valid 2-byte shard's bytes to break in the cases below.
class BadShard : public ::testing::Test {
 protected:
  void SetUp() override {
    write_shard(dir_ / "good.tok", {"byte", 259, 256}, {{10, 20, 30}, {40}});
    good_ = amor::testing::read_file(dir_ / "good.tok");
  }
  std::string write(const std::string& bytes) { return dir_.write("bad.tok", bytes); }
  TempDir dir_{"shard_bad"};
  std::string good_;
};

TEST_F(BadShard, WrongMagic) {
  std::string b = good_;
  std::memcpy(b.data(), "PK\x03\x04zip!", 8);
  std::string p = write(b);
  expect_error([&] { TokenShard s(p); }, {p, "not a token shard", "magic 'PK\\x03\\x04zip!'"});
}

TEST_F(BadShard, WrongVersion) {
  std::string b = good_;
  patch_u32(b, 8, 2);
  std::string p = write(b);
  expect_error([&] { TokenShard s(p); }, {p, "version 2 is not supported", "version 1"});
}

TEST_F(BadShard, WrongWidth) {
  for (uint32_t width : {0u, 1u, 3u, 8u}) {
    std::string b = good_;
    patch_u32(b, 12, width);
    std::string p = write(b);
    expect_error([&] { TokenShard s(p); }, {p, fmt::format("token width {} bytes", width), "expected 2 or 4"});
  }
}

TEST_F(BadShard, TwoByteWidthWithTooLargeAVocabulary) {
  std::string b = good_;
  patch_u32(b, 24, 70000);
  std::string p = write(b);
  expect_error([&] { TokenShard s(p); }, {p, "2-byte tokens cannot hold a vocabulary of 70000"});
}

TEST_F(BadShard, Truncated) {
  std::string p = write(good_.substr(0, good_.size() - 2));  // last token missing
  expect_error([&] { TokenShard s(p); }, {p, "truncated token shard", "6 tokens", "but the file has 138 bytes"});
  p = write(good_.substr(0, good_.size() - 1));  // half a token
  expect_error([&] { TokenShard s(p); }, {p, "6 tokens of 2 bytes"});
  p = write(good_.substr(0, 100));  // inside the header
  expect_error([&] { TokenShard s(p); }, {p, "truncated token shard: 100 bytes", "128-byte header"});
  p = write("");
  expect_error([&] { TokenShard s(p); }, {p, "truncated token shard: 0 bytes"});
  p = write("AMOR");
  expect_error([&] { TokenShard s(p); }, {p, "truncated token shard: 4 bytes"});
  p = write("{\"text\": 1}");  // a small foreign file is not called truncated
  expect_error([&] { TokenShard s(p); }, {p, "not a token shard"});
}

TEST_F(BadShard, TrailingBytes) {
  std::string p = write(good_ + std::string(2, '\0'));
  expect_error([&] { TokenShard s(p); }, {p, "malformed token shard", "6 tokens", "file has 142 bytes"});
}

TEST_F(BadShard, EosOutsideVocabularyAndUnterminatedName) {
  std::string b = good_;
  patch_u32(b, 28, 300);
  std::string p = write(b);
  expect_error([&] { TokenShard s(p); }, {p, "EOS id 300 is outside the vocabulary of 259"});
  b = good_;
  std::memset(b.data() + 64, 'n', 64);
  p = write(b);
  expect_error([&] { TokenShard s(p); }, {p, "tokenizer name field is not NUL-terminated"});
}

TEST_F(BadShard, CorruptedTokenIdIsCaughtOnRead) {
  std::string b = good_;
  b[kHeaderBytes + 2 * 1] = static_cast<char>(0xff);  // token 1 becomes 0x..ff >= 259
  b[kHeaderBytes + 2 * 1 + 1] = static_cast<char>(0x7f);
  std::string p = write(b);
  TokenShard s(p);  // the header is fine
  expect_error([&] { read_all(s); }, {p, "corrupted token shard: token 1 has id 32767"});
}

TEST_F(BadShard, MissingFileAndFolder) {
  expect_error([&] { TokenShard s(dir_ / "nope.tok"); }, {"nope.tok", "cannot open token shard", "No such file"});
  expect_error([&] { TokenShard s(dir_.str()); }, {dir_.str(), "not a regular file"});
}

TEST_F(BadShard, ReadPastTheEnd) {
  TokenShard s(dir_ / "good.tok");
  std::vector<int32_t> v(10);
  expect_error([&] { s.read(4, 3, v.data()); }, {"good.tok", "past the end (6 tokens)"});
}

}  // namespace
}  // namespace amor::shards
