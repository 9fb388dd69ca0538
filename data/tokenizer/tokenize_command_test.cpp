// The tokenize command on strings: ids, decoding, statistics and its usage errors.
#include "data/tokenizer/tokenize_command.h"

#include <gtest/gtest.h>

#include <sstream>

#include "data/tokenizer/test_util.h"

namespace amor {
namespace {

struct Result {
  int status;
  std::string out, err;
};

Result run(std::vector<std::string> args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  const int status = tokenize_command(args, in, out, err);
  return {status, out.str(), err.str()};
}

TEST(TokenizeCommand, EncodesFilesAndStdin) {
  tokenizer::testing::TempDir dir;
  const std::string a = tokenizer::testing::write_file(dir.file("a.txt"), "Hi<|eos|>");
  const Result r = run({"--tokenizer", "byte", a, "-"}, "\xC3\xA9");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "72 105 60 124 101 111 115 124 62\n195 169\n");
  EXPECT_EQ(run({"--tokenizer", "byte", "--special"}, "Hi<|eos|>").out, "72 105 256\n");
}

TEST(TokenizeCommand, DecodesIds) {
  const Result r = run({"--tokenizer", "byte", "--decode"}, "72 105\n 256 ");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "Hi<|eos|>");
}

TEST(TokenizeCommand, Stats) {
  const Result r = run({"--tokenizer", "byte", "--stats"}, "abcd");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("-: 4 bytes, 4 tokens (1.00 bytes/token)"), std::string::npos) << r.out;
}

TEST(TokenizeCommand, Errors) {
  Result r = run({"--frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown option '--frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: tokenize"), std::string::npos);
  r = run({"--decode", "--stats"});
  EXPECT_EQ(r.status, 2);
  r = run({"--tokenizer", "byte", "/nonexistent/in.txt"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "tokenize: /nonexistent/in.txt: cannot open for reading\n");
  r = run({"--tokenizer", "byte", "--decode"}, "12 x3");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "tokenize: -: 'x3' is not a token id\n");
  r = run({"--tokenizer", "byte", "--decode"}, "300");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("id 300"), std::string::npos) << r.err;
  r = run({"--tokenizer", "nope"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown tokenizer 'nope'"), std::string::npos) << r.err;
  EXPECT_EQ(run({"--help"}).status, 0);
}

}  // namespace
}  // namespace amor
