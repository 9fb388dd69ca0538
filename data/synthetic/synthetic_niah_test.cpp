// RULER NIAH: every task on a length x depth grid hits its token budget, puts the answer's needle
// at the requested depth, carries its answers in the text, uses RULER's template, is
// deterministic per seed, and rejects bad parameters with errors naming them.
#include <gtest/gtest.h>

#include <regex>

#include "data/synthetic/niah.h"
#include "data/synthetic/test_util.h"

namespace amor::synthetic {
namespace {

using testing::word_count;

const std::string& essay() {
  static const std::string e = testing::test_essay(400);  // ~36k words
  return e;
}

using testing::error_of;

// The context is what lies between the template's first line and its question.
std::string_view context_of(const std::string& prompt) {
  const size_t b = prompt.find('\n') + 1;
  const size_t e = prompt.rfind("\nWhat ");
  return std::string_view(prompt).substr(b, e - b);
}

size_t count_of(std::string_view hay, std::string_view needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string_view::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// The largest haystack unit of a task, in tokens and bytes: how far below the budget a prompt may
// stop, and how far from the requested depth a needle may land.
size_t unit_tokens(const NiahTask& t) {
  if (t.haystack == HaystackKind::Essay) return 4;   // one word (+ the sentence splitter's nothing)
  return t.key_type == NeedleType::Uuids ? 40 : 30;  // a noise block or a distractor needle
}

TEST(SyntheticNiah, EveryTaskOnAGridHitsLengthDepthAndAnswers) {
  const std::vector<int64_t> lengths{512, 2048};
  const std::vector<double> depths{0, 25, 50, 75, 100};
  for (const std::string& name : niah_task_names()) {
    SCOPED_TRACE(name);
    NiahGridConfig g;
    g.task = niah_task(name);
    g.lengths = lengths;
    g.depths = depths;
    g.samples_per_cell = 2;
    g.tokens_to_generate = 32;
    const auto samples = niah_grid(g, word_count, essay());
    ASSERT_EQ(samples.size(), lengths.size() * depths.size() * 2);
    for (size_t i = 0; i < samples.size(); ++i) {
      const TextSample& s = samples[i];
      const int64_t L = lengths[i / 10];
      const double d = depths[(i / 2) % 5];
      SCOPED_TRACE("length " + std::to_string(L) + " depth " + std::to_string(d));
      EXPECT_EQ(s.task, name);
      EXPECT_EQ(s.max_seq_length, L);
      EXPECT_EQ(s.depth_percent, d);
      // Length: the longest prompt that fits, i.e. within one haystack unit of the budget.
      const auto budget = static_cast<size_t>(L - 32);
      EXPECT_EQ(static_cast<size_t>(s.prompt_tokens), word_count(s.prompt));
      EXPECT_LE(static_cast<size_t>(s.prompt_tokens), budget);
      EXPECT_GT(static_cast<size_t>(s.prompt_tokens) + unit_tokens(g.task), budget);
      // Answers: each in its needle sentence inside the context.
      const std::string_view ctx = context_of(s.prompt);
      const int answers = g.task.num_values * g.task.num_queries;
      ASSERT_EQ(s.answers.size(), static_cast<size_t>(answers));
      ASSERT_EQ(s.answer_depths.size(), s.answers.size());
      for (size_t a = 0; a < s.answers.size(); ++a) {
        const std::string needle_end = " is: " + s.answers[a] + ".";
        const size_t at = ctx.find(needle_end);
        ASSERT_NE(at, std::string_view::npos) << s.answers[a];
        const size_t start = ctx.rfind("One of the special magic ", at);
        EXPECT_NEAR(s.answer_depths[a], 100.0 * start / ctx.size(), 1e-9);
      }
      // Depth: the first answer's needle starts where d% of the context is, up to one haystack
      // unit (needles go between units) and the needles themselves (they take up room too).
      const auto needles =
          static_cast<size_t>(std::max(g.task.num_keys, g.task.num_queries) * g.task.num_values);
      const size_t needle_chars = g.task.key_type == NeedleType::Uuids ? 120 : 70;
      const size_t unit_chars = g.task.haystack == HaystackKind::Essay    ? 100
                                : g.task.haystack == HaystackKind::Repeat ? 90
                                                                          : needle_chars;
      const double slack =
          100.0 * static_cast<double>(unit_chars + needles * needle_chars) / ctx.size();
      EXPECT_NEAR(s.answer_depths[0], d, slack);
      EXPECT_DOUBLE_EQ(score_string_match_all({s.prompt}, {s}).score, 1.0);
    }
  }
}

TEST(SyntheticNiah, SingleNeedleUsesRulersSingularTemplate) {
  NiahConfig c;
  c.task = niah_task("niah_single_1");
  c.max_seq_length = 300;
  c.tokens_to_generate = 20;
  c.depth_percent = 50;
  const TextSample s = niah(c, word_count).at(0);
  const std::regex needle("One of the special magic numbers for ([a-z]+-[a-z]+) is: ([0-9]{7})\\.");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s.prompt, m, needle)) << s.prompt;
  const std::string key = m[1], value = m[2];
  EXPECT_EQ(s.answers, std::vector<std::string>{value});
  EXPECT_EQ(
      s.prompt.rfind(
          "A special magic number is hidden within the following text. Make sure to memorize it. "
          "I will quiz you about the number afterwards.\nThe grass is green. The sky is blue. "
          "The sun is yellow. Here we go. There and back again.\n",
          0),
      0u);
  const std::string tail = "\nWhat is the special magic number for " + key +
                           " mentioned in the provided text? The special magic number for " + key +
                           " mentioned in the provided text is";
  ASSERT_GE(s.prompt.size(), tail.size());
  EXPECT_EQ(s.prompt.substr(s.prompt.size() - tail.size()), tail);
  // Noise haystack lines are RULER's repeat sentence; exactly one line is the needle.
  const std::string_view ctx = context_of(s.prompt);
  EXPECT_EQ(count_of(ctx, "One of the special magic"), 1u);
  EXPECT_GT(count_of(ctx,
                     "The grass is green. The sky is blue. The sun is yellow. Here we go. There "
                     "and back again.\n"),
            5u);
}

TEST(SyntheticNiah, PluralTemplatesAndQueryLists) {
  NiahConfig c;
  c.task = niah_task("niah_multiquery");
  c.max_seq_length = 1500;
  c.tokens_to_generate = 50;
  const TextSample s = niah(c, word_count, essay()).at(0);
  EXPECT_EQ(
      s.prompt.rfind("Some special magic numbers are hidden within the following text. Make sure "
                     "to memorize it. I will quiz you about the numbers afterwards.\n",
                     0),
      0u);
  const std::regex tail(
      "\nWhat are all the special magic numbers for ([a-z-]+), ([a-z-]+), ([a-z-]+), and ([a-z-]+) "
      "mentioned in the provided text\\? The special magic numbers for \\1, \\2, \\3, and \\4 "
      "mentioned in the provided text are$");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s.prompt, m, tail)) << s.prompt.substr(s.prompt.size() - 300);
  ASSERT_EQ(s.answers.size(), 4u);
  for (int q = 0; q < 4; ++q) {  // answers follow the query order
    const std::string n =
        "One of the special magic numbers for " + m[q + 1].str() + " is: " + s.answers[q] + ".";
    EXPECT_EQ(count_of(s.prompt, n), 1u) << n;
  }
  EXPECT_EQ(s.answer_depths.size(), 4u);
  EXPECT_DOUBLE_EQ(s.depth_percent, -1.0);
  for (double d : s.answer_depths) {
    EXPECT_GE(d, 0.0);
    EXPECT_LE(d, 100.0);
  }
}

TEST(SyntheticNiah, MultiKeyAndMultiValueNeedles) {
  NiahConfig c;
  c.max_seq_length = 1200;
  c.tokens_to_generate = 50;
  c.depth_percent = 40;

  c.task = niah_task("niah_multikey_1");  // 4 keys in the essay, one asked
  TextSample s = niah(c, word_count, essay()).at(0);
  EXPECT_EQ(count_of(s.prompt, "One of the special magic numbers for "), 4u);
  EXPECT_EQ(s.answers.size(), 1u);

  c.task = niah_task("niah_multivalue");  // one key, 4 values, all asked
  s = niah(c, word_count, essay()).at(0);
  EXPECT_EQ(count_of(s.prompt, "One of the special magic numbers for "), 4u);
  EXPECT_EQ(s.answers.size(), 4u);
  EXPECT_NE(s.prompt.find("What are all the special magic numbers for"), std::string::npos);

  // niah_multikey_2: the haystack is all needles; only one has the asked key.
  c.task = niah_task("niah_multikey_2");
  s = niah(c, word_count).at(0);
  const std::regex tail("magic number for ([a-z]+-[a-z]+) mentioned in the provided text is$");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s.prompt, m, tail));
  const std::string_view ctx = context_of(s.prompt);
  const size_t lines = count_of(ctx, "\n") + 1;
  EXPECT_EQ(count_of(ctx, "One of the special magic numbers for "), lines);
  EXPECT_GT(lines, 20u);
  EXPECT_EQ(count_of(ctx, "for " + m[1].str() + " is: "), 1u);

  // niah_multikey_3: uuid keys and values, needle haystack.
  c.task = niah_task("niah_multikey_3");
  s = niah(c, word_count).at(0);
  const std::string uuid = "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";
  EXPECT_TRUE(std::regex_match(s.answers.at(0), std::regex(uuid))) << s.answers[0];
  EXPECT_TRUE(std::regex_search(s.prompt, std::regex("One of the special magic uuids for " + uuid +
                                                     " is: " + s.answers[0] + "\\.")));
  EXPECT_NE(s.prompt.find("A special magic uuid is hidden"), std::string::npos);

  c.task = niah_task("niah_single_3");
  s = niah(c, word_count, essay()).at(0);
  EXPECT_TRUE(std::regex_match(s.answers.at(0), std::regex(uuid))) << s.answers[0];
}

TEST(SyntheticNiah, AnyTokenizerAndLongerLengths) {
  // A byte-level count and a 16k length: still within one unit of the budget.
  NiahConfig c;
  c.task = niah_task("niah_single_2");
  c.max_seq_length = 16384;
  c.depth_percent = 10;
  c.num_samples = 3;
  const auto samples = niah(c, testing::byte_count, essay());
  for (const auto& s : samples) {
    EXPECT_LE(s.prompt_tokens, 16384 - 128);
    EXPECT_GT(s.prompt_tokens, 16384 - 128 - 20);  // one essay word in bytes
    EXPECT_NEAR(s.answer_depths[0], 10.0, 1.0);
  }
}

TEST(SyntheticNiah, DeterministicPerSeedAndCell) {
  NiahConfig c;
  c.task = niah_task("niah_multikey_2");
  c.max_seq_length = 800;
  c.depth_percent = 30;
  c.num_samples = 3;
  const auto a = niah(c, word_count), b = niah(c, word_count);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].answers, b[i].answers);
  }
  EXPECT_NE(a[0].prompt, a[1].prompt);
  c.num_samples = 1;
  EXPECT_EQ(niah(c, word_count)[0].prompt, a[0].prompt)
      << "sample 0 does not depend on num_samples";
  c.seed = 43;
  EXPECT_NE(niah(c, word_count)[0].prompt, a[0].prompt);
  // A grid cell equals the single-cell call.
  NiahGridConfig g;
  g.task = c.task;
  g.lengths = {700, 800};
  g.depths = {10, 30};
  g.samples_per_cell = 3;
  g.tokens_to_generate = c.tokens_to_generate;
  const auto grid = niah_grid(g, word_count);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(grid[9 + i].prompt, a[i].prompt);
}

TEST(SyntheticNiah, BadParametersNameTheParameter) {
  NiahConfig c;
  c.task = niah_task("niah_single_1");
  c.max_seq_length = 4096;
  EXPECT_NE(error_of([] {
              niah_task("niah_single_4");
            }).find("unknown NIAH task 'niah_single_4': expected one of niah_single_1, "),
            std::string::npos);
  c.max_seq_length = 128;
  EXPECT_NE(error_of([&] {
              niah(c, word_count);
            }).find("niah_single_1: max_seq_length 128 must exceed tokens_to_generate 128"),
            std::string::npos);
  c.max_seq_length = 160;
  EXPECT_NE(
      error_of([&] { niah(c, word_count); })
          .find("niah_single_1: max_seq_length 160 is too small: the prompt with its needles and "
                "no haystack takes"),
      std::string::npos);
  c.max_seq_length = 4096;
  c.depth_percent = 101;
  EXPECT_NE(error_of([&] { niah(c, word_count); }).find("depth_percent 101 is outside [0, 100]"),
            std::string::npos);
  c.depth_percent = 50;
  c.num_samples = 0;
  EXPECT_NE(error_of([&] { niah(c, word_count); }).find("num_samples must be at least 1"),
            std::string::npos);
  c.num_samples = 1;
  c.task = niah_task("niah_single_2");
  EXPECT_NE(error_of([&] {
              niah(c, word_count, " \n ");
            }).find("niah_single_2: the essay haystack needs essay text"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] {
        niah(c, word_count, testing::test_essay(2));
      }).find("niah_single_2: the essay text is too short for max_seq_length 4096: all of its"),
      std::string::npos);
  c.task.num_values = 41;
  EXPECT_NE(
      error_of([&] { niah(c, word_count, essay()); }).find("41 needles (keys x values) exceed"),
      std::string::npos);
  NiahGridConfig g;
  g.task = niah_task("niah_single_1");
  g.depths = {50};
  EXPECT_NE(
      error_of([&] { niah_grid(g, word_count); }).find("niah_single_1: the grid has no lengths"),
      std::string::npos);
}

}  // namespace
}  // namespace amor::synthetic
