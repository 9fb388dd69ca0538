// Passkey retrieval: the landmark prompt's exact lines, the filler sized to the budget, the key
// at the requested depth, determinism, the token form and parameter errors.
#include <gtest/gtest.h>

#include "data/synthetic/passkey.h"
#include "data/synthetic/test_util.h"

namespace amor::synthetic {
namespace {

using testing::word_count;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find('\n', b)) != std::string::npos; b = e + 1)
    out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

using testing::error_of;

TEST(SyntheticPasskey, PromptLinesLengthAndDepth) {
  for (double depth : {0.0, 33.0, 100.0}) {
    for (int64_t L : {256, 3000}) {
      PasskeyConfig c;
      c.max_seq_length = L;
      c.depth_percent = depth;
      c.num_samples = 3;
      for (const TextSample& s : passkey(c, word_count)) {
        const auto lines = lines_of(s.prompt);
        ASSERT_EQ(lines.size(), 5u) << s.prompt;
        EXPECT_EQ(lines[0],
                  "There is an important info hidden inside a lot of irrelevant text. Find it and "
                  "memorize them. I will quiz you about the important information there.");
        ASSERT_EQ(s.answers.size(), 1u);
        const std::string& k = s.answers[0];
        EXPECT_GE(std::stol(k), 1);
        EXPECT_LE(std::stol(k), 50000);
        EXPECT_EQ(lines[2], "The pass key is " + k + ". Remember it. " + k + " is the pass key.");
        EXPECT_EQ(lines[4], "What is the pass key? The pass key is");
        // Both filler pieces are prefixes of the repeated garbage sentence.
        const std::string garbage =
            "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back "
            "again.";
        std::string inf;
        while (inf.size() < lines[1].size() + lines[3].size() + 100)
          inf += (inf.empty() ? "" : " ") + garbage;
        EXPECT_EQ(inf.rfind(lines[1], 0), 0u);
        EXPECT_EQ(inf.rfind(lines[3], 0), 0u);
        // Prefix = floor(total * depth / 100) characters.
        const double total = static_cast<double>(lines[1].size() + lines[3].size());
        EXPECT_EQ(lines[1].size(), static_cast<size_t>(std::floor(total * depth / 100.0)));
        // Length: the filler is sized per character, so the prompt is within a token or two.
        EXPECT_LE(s.prompt_tokens, L - c.tokens_to_generate);
        EXPECT_GE(s.prompt_tokens, L - c.tokens_to_generate - 2);
        EXPECT_EQ(s.prompt_tokens, static_cast<int64_t>(word_count(s.prompt)));
        EXPECT_NEAR(s.answer_depths.at(0), depth, 100.0 / total + 2.0 * 100 * 60 / total);
        EXPECT_DOUBLE_EQ(score_string_match_all({" " + k + "."}, {s}).score, 1.0);
      }
    }
  }
}

TEST(SyntheticPasskey, RandomDepthsVaryAndSeedsReproduce) {
  PasskeyConfig c;
  c.max_seq_length = 1000;
  c.num_samples = 20;
  c.seed = 8;
  const auto a = passkey(c, testing::byte_count), b = passkey(c, testing::byte_count);
  double lo = 100, hi = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].depth_percent, -1.0);
    EXPECT_EQ(a[i].prompt_tokens, 1000 - 16) << "bytes fit exactly";
    lo = std::min(lo, a[i].answer_depths[0]);
    hi = std::max(hi, a[i].answer_depths[0]);
  }
  EXPECT_LT(lo, 25.0);
  EXPECT_GT(hi, 75.0);
  c.seed = 9;
  EXPECT_NE(passkey(c, testing::byte_count)[0].prompt, a[0].prompt);
}

TEST(SyntheticPasskey, TokenFormLabelsTheKey) {
  PasskeyConfig c;
  c.max_seq_length = 400;
  c.depth_percent = 50;
  c.num_samples = 2;
  const auto samples = passkey(c, testing::byte_count);
  const TokenTask t = to_token_task(samples, testing::byte_encode, 0);
  const auto y = t.targets.to_vector<int32_t>();
  const int64_t T = t.tokens.size(1);
  for (int64_t i = 0; i < 2; ++i) {
    std::string labelled;
    for (int64_t p = 0; p < T; ++p)
      if (y[i * T + p] != kIgnore) labelled += static_cast<char>(y[i * T + p]);
    EXPECT_EQ(labelled, " " + samples[i].answers[0]);
  }
}

TEST(SyntheticPasskey, BadParameters) {
  PasskeyConfig c;
  c.max_seq_length = 40;
  EXPECT_NE(error_of([&] {
              passkey(c, word_count);
            }).find("passkey: max_seq_length 40 is too small: the prompt without filler takes"),
            std::string::npos);
  c.max_seq_length = 16;
  EXPECT_NE(error_of([&] {
              passkey(c, word_count);
            }).find("max_seq_length 16 must exceed tokens_to_generate 16"),
            std::string::npos);
  c.max_seq_length = 1000;
  c.depth_percent = -5;
  EXPECT_NE(error_of([&] { passkey(c, word_count); }).find("depth_percent -5 is outside [0, 100]"),
            std::string::npos);
  c.depth_percent.reset();
  c.passkey_min = 10;
  c.passkey_max = 9;
  EXPECT_NE(error_of([&] { passkey(c, word_count); }).find("passkey_min 10 and passkey_max 9"),
            std::string::npos);
}

}  // namespace
}  // namespace amor::synthetic
