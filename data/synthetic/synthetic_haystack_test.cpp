// Haystack building blocks: sentence splitting, the normalised essay and its prefixes, and the
// budget search.
#include <gtest/gtest.h>

#include "data/synthetic/haystack.h"
#include "data/synthetic/test_util.h"

namespace amor::synthetic {
namespace {

std::vector<std::string> sentences_of(std::string_view text) {
  std::vector<std::string> out;
  for (auto [b, e] : split_sentences(text)) out.emplace_back(text.substr(b, e - b));
  return out;
}

TEST(SyntheticHaystack, SplitsSentencesLikePunktOnProse) {
  EXPECT_EQ(
      sentences_of("Mr. Smith paid $3.50 for it. Did he? \"Yes!\" she said. J. R. R. Tolkien "
                   "wrote e.g. this. The end"),
      (std::vector<std::string>{"Mr. Smith paid $3.50 for it.", "Did he?", "\"Yes!\" she said.",
                                "J. R. R. Tolkien wrote e.g. this.", "The end"}));
  EXPECT_EQ(sentences_of("It went on... and on. Then stopped."),
            (std::vector<std::string>{"It went on... and on.", "Then stopped."}));
  EXPECT_EQ(sentences_of("One. Two.\xe2\x80\x9d Three"),
            (std::vector<std::string>{"One.", "Two.\xe2\x80\x9d", "Three"}));
  EXPECT_TRUE(sentences_of("   ").empty());
}

TEST(SyntheticHaystack, EssayIsWhitespaceNormalisedAndPrefixesSplitConsistently) {
  const EssayText e("  Alpha beta.\n\nGamma   delta!\tEpsilon zeta. Eta");
  EXPECT_EQ(e.num_words(), 7u);
  EXPECT_EQ(e.prefix(7), "Alpha beta. Gamma delta! Epsilon zeta. Eta");
  EXPECT_EQ(e.prefix(3), "Alpha beta. Gamma");
  EXPECT_EQ(e.prefix(0), "");
  const std::string essay = testing::test_essay(5);
  const EssayText big(essay);
  for (size_t n : {0u, 1u, 5u, 37u, 100u, 250u}) {
    const std::string_view p = big.prefix(n);
    EXPECT_EQ(big.sentences(n), split_sentences(p)) << "prefix of " << n << " words";
  }
}

TEST(SyntheticHaystack, FitLargestFindsTheBoundaryFromAnyHint) {
  int calls = 0;
  auto cost = [&](size_t n) {
    ++calls;
    return 3 * n + 5;
  };
  for (size_t hint : {0u, 1u, 31u, 32u, 500u, 100000u}) {
    EXPECT_EQ(fit_largest(cost, 100, 1000, hint), 31u) << "hint " << hint;  // 3*31+5 = 98 <= 100
  }
  calls = 0;
  EXPECT_EQ(fit_largest(cost, 100, 1000, 31), 31u);
  EXPECT_LE(calls, 2) << "a correct hint costs two evaluations";
  EXPECT_EQ(fit_largest(cost, 100, 20, 0), 20u) << "capped by max_n";
  EXPECT_EQ(fit_largest(cost, 4, 20, 7), std::nullopt) << "cost(0) = 5 > 4";
  EXPECT_EQ(fit_largest(cost, 5, 20, 7), 0u);
}

}  // namespace
}  // namespace amor::synthetic
