// Exactness: our GPT-2 and Llama-3 ids equal those of the npm packages' own JavaScript encoders
// (tests/tokenizer_oracle/oracle.js run by Node.js) on the hand-written tricky strings of
// tests/tokenizer_oracle/strings.json plus seeded random mixtures of tricky fragments, and
// decode(encode(s)) == s. Skipped, saying why, where scripts/fetch_tokenizers.sh has not run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/json/json.h"
#include "data/tokenizer/test_util.h"
#include "data/tokenizer/tokenizer.h"
#include "kernels/core/error.h"

namespace amor {
namespace {

using Ids = std::vector<int32_t>;

// Strings built from fragments that stress the pre-tokenizers and the added-token split.
std::vector<std::string> random_strings(size_t count, uint32_t seed) {
  // clang-format off
  static const char* const fragments[] = {
      "a", "the", "The", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "'s", "'T", "'ll", "'", "\"",
      "123", "4567", "9", " 42", "3.14", "\xE6\x97\xA5\xE6\x9C\xAC", "\xE8\xAA\x9E",
      "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xC3\xA9", "e\xCC\x81",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82", "!", "?!", "...", ",\"", ",", "-", "_",
      "\xC3\x9F", "\xC4\xB0", "x", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<|",
      "|>", "\xC2\xA0", "\xE3\x80\x80", "\xEF\xBB\xBF", "\xD9\xA3", "hello", "World", "(", ")",
      "{\"k\": 1}", "    ", "def ", "\xE0\xA4\xB9\xE0\xA4\xBF"};
  // clang-format on
  const size_t n = sizeof(fragments) / sizeof(fragments[0]);
  uint64_t state = seed;
  auto next = [&] {  // splitmix64: the same sequence everywhere
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string s;
    for (size_t k = 1 + next() % 30; k > 0; --k) s += fragments[next() % n];
    out.push_back(std::move(s));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class TokenizerOracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string npm;
    try {
      npm = npm_cache_dir();
    } catch (const Error& e) {
      skip_ = e.what();
      return;
    }
    const NpmTokenizerFiles files = npm_tokenizer_files(npm);
    for (const std::string& f :
         {files.llama3_tokenizer_json, files.gpt2_encoder_json, files.gpt2_vocab_bpe}) {
      if (!std::filesystem::exists(f)) {
        skip_ = "npm tokenizer packages not fetched (" + f +
                " is missing): run scripts/fetch_tokenizers.sh, or set AMOR_NPM_CACHE";
        return;
      }
    }
    if (std::system("node --version >/dev/null 2>&1") != 0) {
      skip_ = "Node.js ('node') is not on PATH, so the JavaScript reference encoders cannot run";
      return;
    }
    const std::string src = std::string(AMOR_SOURCE_DIR) + "/tests/tokenizer_oracle/";
    const json::Value fixture = json::parse_file(src + "strings.json");
    for (const json::Value& s : fixture.as_array()) strings_.push_back(s.as_string());
    fixture_count_ = strings_.size();
    for (std::string& s : random_strings(300, 20240607)) strings_.push_back(std::move(s));

    dir_ = std::make_unique<tokenizer::testing::TempDir>();
    json::Array all(strings_.begin(), strings_.end());
    const std::string in =
        tokenizer::testing::write_file(dir_->file("strings.json"), json::Value(all).dump());
    const std::string out = dir_->file("oracle.json"), err = dir_->file("oracle.err");
    const std::string cmd =
        "node '" + src + "oracle.js' '" + npm + "' '" + in + "' '" + out + "' 2>'" + err + "'";
    if (std::system(cmd.c_str()) != 0) {
      failure_ = "the oracle failed: " + cmd + "\n" + read_file(err);
      return;
    }
    oracle_ = json::parse_file(out);
    llama3_ = make_tokenizer("llama3");
    gpt2_ = make_tokenizer("gpt2");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  // Compares our ids for every string with the oracle's list at oracle_[model][key].
  static void expect_same(const Tokenizer& tok, const std::string& model, const std::string& key,
                          bool special_tokens) {
    const json::Array& theirs = oracle_.at(model).at(key).as_array();
    ASSERT_EQ(theirs.size(), strings_.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < strings_.size(); ++i) {
      const Ids ours = tok.encode(strings_[i], {.special_tokens = special_tokens});
      Ids ref;
      for (const json::Value& id : theirs[i].as_array())
        ref.push_back(static_cast<int32_t>(id.as_int()));
      if (ours == ref) continue;
      if (++mismatches > 10) continue;
      std::string a, b;
      for (int32_t id : ours) a += std::to_string(id) + " ";
      for (int32_t id : ref) b += std::to_string(id) + " ";
      ADD_FAILURE() << model << "." << key << " string " << i
                    << (i < fixture_count_ ? " (strings.json)" : " (random)") << " "
                    << json::quote(strings_[i]) << "\n  ours:   " << a << "\n  theirs: " << b;
    }
    EXPECT_EQ(mismatches, 0u) << "of " << strings_.size() << " strings";
  }

  static inline std::string skip_, failure_;
  static inline std::vector<std::string> strings_;
  static inline size_t fixture_count_ = 0;
  static inline json::Value oracle_;
  static inline std::unique_ptr<tokenizer::testing::TempDir> dir_;
  static inline std::unique_ptr<Tokenizer> llama3_, gpt2_;
};

TEST_F(TokenizerOracle, FixtureIsAFewHundredStrings) {
  EXPECT_GE(fixture_count_, 300u);
  EXPECT_EQ(static_cast<size_t>(oracle_.at("count").as_int()), strings_.size());
}

TEST_F(TokenizerOracle, Llama3Vocabulary) {
  EXPECT_EQ(llama3_->vocab_size(), 128256);
  EXPECT_EQ(llama3_->bos_id(), 128000);
  EXPECT_EQ(llama3_->eos_id(), 128001);
  EXPECT_EQ(llama3_->special_id("<|eot_id|>"), 128009);
  EXPECT_EQ(llama3_->token_bytes(128000), "<|begin_of_text|>");
}

TEST_F(TokenizerOracle, Gpt2Vocabulary) {
  EXPECT_EQ(gpt2_->vocab_size(), 50257);
  EXPECT_EQ(gpt2_->bos_id(), 50256);
  EXPECT_EQ(gpt2_->eos_id(), 50256);
}

TEST_F(TokenizerOracle, Llama3WithSpecialTokensEqualsLenml) {
  expect_same(*llama3_, "llama3", "special", true);
}

TEST_F(TokenizerOracle, Llama3PlainTextEqualsLenml) {
  expect_same(*llama3_, "llama3", "plain", false);
}

TEST_F(TokenizerOracle, Gpt2EqualsGpt3Encoder) {
  expect_same(*gpt2_, "gpt2", "gpt3_encoder", false);
}

TEST_F(TokenizerOracle, Gpt2EqualsTransformersJs) {
  expect_same(*gpt2_, "gpt2", "special", true);
  expect_same(*gpt2_, "gpt2", "plain", false);
}

TEST_F(TokenizerOracle, DecodeInvertsEncode) {
  for (const Tokenizer* tok : {llama3_.get(), gpt2_.get()})
    for (const std::string& s : strings_)
      for (bool special : {false, true})
        EXPECT_EQ(tok->decode(tok->encode(s, {.special_tokens = special})), s)
            << tok->name() << " " << json::quote(s);
}

}  // namespace
}  // namespace amor
