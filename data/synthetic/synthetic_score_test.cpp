// Scoring: token accuracy at labelled positions and RULER's string matches, on hand-made
// predictions whose scores are counted by hand; the token form of text samples.
#include <gtest/gtest.h>

#include <cmath>

#include "data/synthetic/test_util.h"
#include "data/synthetic/text_task.h"
#include "data/synthetic/token_task.h"

namespace amor::synthetic {
namespace {

using testing::error_of;

TEST(SyntheticScore, TokenAccuracyCountsLabelledPositionsOnly) {
  const int32_t I = kIgnore;
  // Example 0: labels at t=1 (7) and t=3 (9); predicted 7 (right) and 8 (wrong) -> 1/2.
  // Example 1: labels at t=0, 1, 2 (4, 5, 6); predicted 4, 5, 6 -> 3/3; t=3 unlabelled but wrong.
  // Example 2: no labels -> NaN, not counted.
  const Tensor y = Tensor::from_vector<int32_t>({3, 4}, {I, 7, I, 9, 4, 5, 6, I, I, I, I, I});
  const Tensor p = Tensor::from_vector<int32_t>({3, 4}, {0, 7, 0, 8, 4, 5, 6, 1, 2, 2, 2, 2});
  const TokenScore s = score_tokens(p, y);
  EXPECT_EQ(s.labelled, 5);
  EXPECT_EQ(s.correct, 4);
  EXPECT_DOUBLE_EQ(s.accuracy, 4.0 / 5.0);
  ASSERT_EQ(s.per_example.size(), 3u);
  EXPECT_DOUBLE_EQ(s.per_example[0], 0.5);
  EXPECT_DOUBLE_EQ(s.per_example[1], 1.0);
  EXPECT_TRUE(std::isnan(s.per_example[2]));
}

TEST(SyntheticScore, TokenAccuracyErrors) {
  const Tensor y = Tensor::from_vector<int32_t>({1, 2}, {kIgnore, 3});
  EXPECT_NE(error_of([&] {
              score_tokens(Tensor::from_vector<int32_t>({2, 1}, {3, 3}), y);
            }).find("predictions i32[2,1]@cpu do not match targets i32[1,2]@cpu"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              score_tokens(Tensor::from_vector<float>({1, 2}, {0, 3}), y);
            }).find("must both be i32"),
            std::string::npos);
  const Tensor none = Tensor::from_vector<int32_t>({1, 2}, {kIgnore, kIgnore});
  EXPECT_NE(error_of([&] { score_tokens(none, none); }).find("no labelled position"),
            std::string::npos);
}

TEST(SyntheticScore, StringMatchAllIsTheFractionFound) {
  EXPECT_DOUBLE_EQ(string_match_all("The numbers are 1234567 and 7654321.", {"1234567", "7654321"}),
                   1.0);
  EXPECT_DOUBLE_EQ(string_match_all("The numbers are 1234567 and 765432.", {"1234567", "7654321"}),
                   0.5);
  EXPECT_DOUBLE_EQ(string_match_all("", {"1", "2", "3"}), 0.0);
  // Case-insensitive, as RULER lowers both sides.
  EXPECT_DOUBLE_EQ(string_match_all("ID: 9F1C2A3B-0000", {"9f1c2a3b", "zz"}), 0.5);
  EXPECT_DOUBLE_EQ(string_match_part("no 42 here", {"7", "42"}), 1.0);
  EXPECT_DOUBLE_EQ(string_match_part("nothing", {"7", "42"}), 0.0);
  EXPECT_NE(error_of([] { string_match_all("x", {}); }).find("no reference answers"),
            std::string::npos);
}

TEST(SyntheticScore, ScoreOverSamplesIsTheMean) {
  std::vector<TextSample> s(3);
  s[0].answers = {"111"};
  s[1].answers = {"222", "333", "444", "555"};
  s[2].answers = {"666"};
  // 1, 2/4, 0 -> mean 0.5
  const TextScore r = score_string_match_all({"111", "222 and 555", "66"}, s);
  EXPECT_DOUBLE_EQ(r.score, 0.5);
  EXPECT_EQ(r.per_example, (std::vector<double>{1.0, 0.5, 0.0}));
  EXPECT_NE(error_of([&] { score_string_match_all({"a"}, s); }).find("1 predictions for 3 samples"),
            std::string::npos);
}

TEST(SyntheticScore, TokenFormScoresTheAnswerOnly) {
  std::vector<TextSample> s(2);
  s[0].prompt = "key is";
  s[0].answers = {"42"};
  s[1].prompt = "ab";
  s[1].answers = {"7", "8"};
  const TokenTask t = to_token_task(s, testing::byte_encode, /*pad_id=*/0);
  // Sequences: "key is 42" (9 bytes) and "ab 7 8" (6 bytes); inputs drop the last byte.
  ASSERT_EQ(t.tokens.shape(), (Shape{2, 8}));
  const auto x = t.tokens.to_vector<int32_t>(), y = t.targets.to_vector<int32_t>();
  const std::string a = "key is 42";
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x[i], a[i]);
  // Prompt is 6 bytes: positions 5, 6, 7 predict ' ', '4', '2'.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], kIgnore);
  EXPECT_EQ(y[5], ' ');
  EXPECT_EQ(y[6], '4');
  EXPECT_EQ(y[7], '2');
  const std::string b = "ab 7 8";
  for (int i = 0; i < 5; ++i) EXPECT_EQ(x[8 + i], b[i]);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(x[8 + i], 0) << "right padding";
  EXPECT_EQ(y[8 + 0], kIgnore);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(y[8 + i], b[i + 1]);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(y[8 + i], kIgnore);
  // Predicting the targets scores 1.
  EXPECT_DOUBLE_EQ(score_tokens(t.targets, t.targets).accuracy, 1.0);
}

}  // namespace
}  // namespace amor::synthetic
