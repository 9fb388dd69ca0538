// LongBench's metrics against values worked out by hand in each test.
#include "runner/eval/longbench_metrics.h"

#include <gtest/gtest.h>

#include "kernels/core/error.h"

namespace amor::eval {
namespace {

TEST(LongBenchMetrics, NormalizeAnswerLowersDropsPunctuationArticlesAndSpaces) {
  EXPECT_EQ(normalize_answer("The Cat, a dog!  An apple"), "cat dog apple");
  // Articles only as whole words: "theory", "banana", "and" stay.
  EXPECT_EQ(normalize_answer("theory and banana"), "theory and banana");
  // Punctuation goes before the article rule, so "the-end" becomes "theend" (kept).
  EXPECT_EQ(normalize_answer("the-end\tof\nA"), "theend of");
}

TEST(LongBenchMetrics, QaF1CountsSharedTokens) {
  // pred {cat, sat}, truth {cat, sat, down}: P = 1, R = 2/3, F1 = 2 * 2/3 / (5/3) = 0.8.
  EXPECT_NEAR(qa_f1_score("the cat sat", "a cat sat down"), 0.8, 1e-12);
  // Counter intersection: min(3, 1) = 1 shared; P = 1/3, R = 1/2, F1 = 2 * (1/6) / (5/6) = 0.4.
  EXPECT_NEAR(qa_f1_score("cat cat cat", "cat dog"), 0.4, 1e-12);
  EXPECT_EQ(qa_f1_score("", "x"), 0.0);
  EXPECT_EQ(qa_f1_score("The.", "the"), 0.0);  // both normalise to nothing: no shared token
}

TEST(LongBenchMetrics, RougeLOneSentence) {
  // ref words {the, cat, was, on, mat} (m = 5), pred {the, cat, sat, on, mat} (n = 5); the LCS
  // "the cat on the mat" has the distinct words {the, cat, on, mat}: R = P = 4/5.
  const double p = 0.8, r = 0.8;
  EXPECT_DOUBLE_EQ(rouge_l_score("the cat sat on the mat", "the cat was on the mat"),
                   2.0 * (p * r) / (p + r + 1e-8));
}

TEST(LongBenchMetrics, RougeLIsSummaryLevelOverSentences) {
  // ref sentences "a c", "b d"; pred sentences "a b", "c d". The union of the per-pair LCS words is
  // {a, c} then {b, d}: all 4 distinct words, so P = R = 1 (a plain LCS of "a b c d" against
  // "a c b d" would give 3/4).
  EXPECT_DOUBLE_EQ(rouge_l_score("a b. c d", "a c. b d"), 2.0 / (2.0 + 1e-8));
}

TEST(LongBenchMetrics, RougeLBacktrackPrefersLeftOnTies) {
  // ref "x y" vs pred sentence "y x": the LCS has length 1 and the package's backtrack (left on a
  // tie) reconstructs {y}; with pred sentence "x" the union becomes {x, y}: P = R = 1. Going up
  // on ties would give {x} alone: P = R = 1/2.
  EXPECT_DOUBLE_EQ(rouge_l_score("y x. x", "x y"), 2.0 / (2.0 + 1e-8));
}

TEST(LongBenchMetrics, RougeLWithoutSentencesIsZero) {
  EXPECT_EQ(rouge_l_score("", "a b"), 0.0);
  EXPECT_EQ(rouge_l_score("...", "a b"), 0.0);
  EXPECT_EQ(rouge_l_score("a b", ""), 0.0);
}

TEST(LongBenchMetrics, FuzzRatio) {
  EXPECT_EQ(fuzz_ratio("kitten", "sitting"), 62);                 // LCS "ittn": 8/13 = 0.615
  EXPECT_EQ(fuzz_ratio("this is a test", "this is a test!"), 97);  // 28/29, fuzzywuzzy's README
  EXPECT_EQ(fuzz_ratio("abcde", "azzzzzzzzzz"), 12);              // 2/16 = 12.5: half to even
  EXPECT_EQ(fuzz_ratio("abc", "abczzzzzzzzzz"), 38);              // 6/16 = 37.5: half to even
  EXPECT_EQ(fuzz_ratio("", ""), 100);
  EXPECT_EQ(fuzz_ratio("", "a"), 0);
  EXPECT_EQ(fuzz_ratio("é", "e"), 0);  // one code point each, no common one: 0/2
}

TEST(LongBenchMetrics, CodeSimTakesTheFirstPlainLine) {
  // Skips "# comment" and "```"; "return x + 1" (12) vs "return x+1" (10): LCS 10, 20/22 -> 91.
  EXPECT_DOUBLE_EQ(code_sim_score("\n# comment\n```\nreturn x + 1\nfoo", "return x+1"), 0.91);
  EXPECT_DOUBLE_EQ(code_sim_score("// only comments", "x"), 0.0);
}

TEST(LongBenchMetrics, ClassificationReproducesLongBenchsLoop) {
  const std::vector<std::string> classes = {"Human being", "Location", "Entity"};
  EXPECT_EQ(classification_score("Location", "Location", classes), 1.0);
  EXPECT_EQ(classification_score("Location or Entity", "Location", classes), 0.5);
  EXPECT_EQ(classification_score("Human being", "Location", classes), 0.0);
  // matches [a, ab, abc]; 'a' is inside the truth "abc" and removed, which skips 'ab' (it would
  // have been removed too): [ab, abc] remain, score 1/2.
  EXPECT_EQ(classification_score("abc", "abc", {"a", "ab", "abc"}), 0.5);
}

TEST(LongBenchMetrics, RetrievalAndCount) {
  EXPECT_DOUBLE_EQ(retrieval_score("Paragraph 3 and 12, probably 3", "Paragraph 3"), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(retrieval_score("none", "Paragraph 3"), 0.0);
  EXPECT_DOUBLE_EQ(retrieval_score("13", "Paragraph x, Paragraph 13"), 1.0);
  EXPECT_THROW(retrieval_score("3", "no paragraph"), Error);
  EXPECT_DOUBLE_EQ(count_score("There are 7 unique paragraphs out of 10", "7"), 0.5);
  EXPECT_DOUBLE_EQ(count_score("seven", "7"), 0.0);
}

TEST(LongBenchMetrics, FirstLine) {
  EXPECT_EQ(first_line("\n\nLOC\nmore"), "LOC");
  EXPECT_EQ(first_line("one"), "one");
  EXPECT_EQ(first_line(""), "");
}

}  // namespace
}  // namespace amor::eval
