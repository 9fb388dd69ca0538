// Token roles (token_roles.h): the code table, MQAR's roles against its generated layout, the
// span-to-token mapping (straddling tokens, errors), and the roles NIAH and passkey prompts carry:
// a partition of the prompt whose needle, distractor, question and instruction spans hold exactly
// those texts.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data/synthetic/mqar.h"
#include "data/synthetic/niah.h"
#include "data/synthetic/passkey.h"
#include "data/synthetic/test_util.h"
#include "data/synthetic/token_roles.h"

namespace amor::synthetic {
namespace {

using testing::word_count;

using testing::error_of;

uint8_t code(TokenRole r) { return static_cast<uint8_t>(r); }

TEST(SyntheticRoles, NamesInCodeOrder) {
  const auto& names = token_role_names();
  ASSERT_EQ(names.size(), 11u);
  EXPECT_EQ(names[0], "none");
  EXPECT_EQ(token_role_name(TokenRole::Other), "other");
  EXPECT_EQ(token_role_name(TokenRole::Key), "key");
  EXPECT_EQ(token_role_name(TokenRole::Value), "value");
  EXPECT_EQ(token_role_name(TokenRole::Query), "query");
  EXPECT_EQ(token_role_name(TokenRole::Filler), "filler");
  EXPECT_EQ(token_role_name(TokenRole::Needle), "needle");
  EXPECT_EQ(token_role_name(TokenRole::Distractor), "distractor");
  EXPECT_EQ(token_role_name(TokenRole::Haystack), "haystack");
  EXPECT_EQ(token_role_name(TokenRole::Question), "question");
  EXPECT_EQ(token_role_name(TokenRole::Answer), "answer");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_NE(error_of([] { token_role_name(static_cast<TokenRole>(11)); }).find("code 11"), std::string::npos);
}

TEST(SyntheticRoles, MqarRolesByHand) {
  // 2 pairs in 10 positions; queries at 4 and 8.
  const std::vector<int32_t> targets{-100, -100, -100, -100, 7, -100, -100, -100, 9, -100};
  const auto r = mqar_roles(targets, 2);
  using R = TokenRole;
  const std::vector<uint8_t> want{code(R::Key),    code(R::Value),  code(R::Key),    code(R::Value),
                                  code(R::Query),  code(R::Filler), code(R::Filler), code(R::Filler),
                                  code(R::Query),  code(R::Filler)};
  EXPECT_EQ(r, want);
  // With answers after the queries (layout lm), positions 5 and 9 are the answers.
  std::vector<uint8_t> with_answers = want;
  with_answers[5] = with_answers[9] = code(R::Answer);
  EXPECT_EQ(mqar_roles(targets, 2, true), with_answers);
  EXPECT_NE(error_of([&] { mqar_roles(targets, 6); }).find("do not fit"), std::string::npos);
  const std::vector<int32_t> bad{-100, 5, -100, -100};
  EXPECT_NE(error_of([&] { mqar_roles(bad, 1); }).find("position 1"), std::string::npos);
}

TEST(SyntheticRoles, MqarGeneratorRolesMatchItsLayout) {
  for (bool random_fill : {false, true}) {
    MqarConfig c;
    c.vocab_size = 512;
    c.input_seq_len = 128;
    c.num_kv_pairs = 16;
    c.num_examples = 50;
    c.random_non_queries = random_fill;
    const TokenTask t = mqar(c);
    ASSERT_TRUE(t.roles.defined());
    ASSERT_EQ(t.roles.shape(), t.tokens.shape());
    const int64_t T = c.input_seq_len, k = c.num_kv_pairs;
    for (int64_t e = 0; e < c.num_examples; ++e) {
      const int32_t* x = t.tokens.data<int32_t>() + e * T;
      const int32_t* y = t.targets.data<int32_t>() + e * T;
      const uint8_t* r = t.roles.data<uint8_t>() + e * T;
      std::map<int32_t, int32_t> value_of;  // key -> value, from the key/value positions
      std::map<TokenRole, int64_t> count;
      for (int64_t p = 0; p < T; ++p) {
        const auto role = static_cast<TokenRole>(r[p]);
        ++count[role];
        if (role == TokenRole::Key) value_of[x[p]] = x[p + 1];
        if (role == TokenRole::Value) EXPECT_EQ(static_cast<TokenRole>(r[p - 1]), TokenRole::Key);
        if (role == TokenRole::Query) {
          // A query repeats a key, and its target is that key's value.
          ASSERT_TRUE(value_of.count(x[p])) << "example " << e << " position " << p;
          EXPECT_EQ(y[p], value_of[x[p]]);
        } else {
          EXPECT_EQ(y[p], kIgnore);
        }
        if (role == TokenRole::Filler && !random_fill) EXPECT_EQ(x[p], 0);
      }
      EXPECT_EQ(count[TokenRole::Key], k);
      EXPECT_EQ(count[TokenRole::Value], k);
      EXPECT_EQ(count[TokenRole::Query], k);
      EXPECT_EQ(count[TokenRole::Filler], T - 3 * k);
    }
  }
}

TEST(SyntheticRoles, TokenRolesFromSpans) {
  using R = TokenRole;
  // "ab cd|EF.|?" : other [0,2), haystack [2,5), needle [5,8), question [8,9)
  const std::vector<RoleSpan> spans{{0, 2, R::Other}, {2, 5, R::Haystack}, {5, 8, R::Needle}, {8, 9, R::Question}};
  // Byte tokens: each byte its span's role.
  const std::vector<size_t> bytes(9, 1);
  EXPECT_EQ(token_roles(spans, 9, bytes),
            (std::vector<uint8_t>{code(R::Other), code(R::Other), code(R::Haystack), code(R::Haystack),
                                  code(R::Haystack), code(R::Needle), code(R::Needle), code(R::Needle),
                                  code(R::Question)}));
  // Tokens [0,3) [3,6) [6,8) [8,9): the first straddles other/haystack (haystack wins), the second
  // haystack/needle (needle wins).
  const std::vector<size_t> merged{3, 3, 2, 1};
  EXPECT_EQ(token_roles(spans, 9, merged),
            (std::vector<uint8_t>{code(R::Haystack), code(R::Needle), code(R::Needle), code(R::Question)}));
  // One token over everything: the most specific role.
  const std::vector<size_t> one{9};
  EXPECT_EQ(token_roles(spans, 9, one), (std::vector<uint8_t>{code(R::Needle)}));
  // Bytes outside every span, and empty tokens, are none; distractor beats question.
  const std::vector<RoleSpan> gap{{2, 4, R::Question}, {4, 6, R::Distractor}};
  const std::vector<size_t> toks{2, 0, 3, 1};
  EXPECT_EQ(token_roles(gap, 6, toks),
            (std::vector<uint8_t>{code(R::None), code(R::None), code(R::Distractor), code(R::Distractor)}));
  // Errors: lengths that do not add up, spans out of order or past the text.
  EXPECT_NE(error_of([&] { token_roles(spans, 9, std::vector<size_t>{4, 4}); }).find("hold 8 bytes, the text 9"),
            std::string::npos);
  const std::vector<RoleSpan> overlap{{0, 5, R::Other}, {4, 9, R::Needle}};
  EXPECT_NE(error_of([&] { token_roles(overlap, 9, bytes); }).find("span 1"), std::string::npos);
  const std::vector<RoleSpan> past{{0, 10, R::Other}};
  EXPECT_NE(error_of([&] { token_roles(past, 9, bytes); }).find("span 0"), std::string::npos);
  // check_role_partition: a gap is named.
  check_role_partition(spans, 9);
  EXPECT_NE(error_of([&] { check_role_partition(gap, 6); }).find("span 0"), std::string::npos);
  EXPECT_NE(error_of([&] { check_role_partition(spans, 10); }).find("cover 9 bytes of a 10-byte"),
            std::string::npos);
}

std::string_view text_of(const TextSample& s, const RoleSpan& r) {
  return std::string_view(s.prompt).substr(r.begin, r.end - r.begin);
}

std::vector<std::string_view> spans_of(const TextSample& s, TokenRole role) {
  std::vector<std::string_view> out;
  for (const auto& r : s.roles)
    if (r.role == role) out.push_back(text_of(s, r));
  return out;
}

TEST(SyntheticRoles, NiahPromptRoles) {
  const std::string essay = testing::test_essay(60);
  for (const std::string& name : niah_task_names()) {
    SCOPED_TRACE(name);
    NiahGridConfig g;
    g.task = niah_task(name);
    g.lengths = {600};
    g.depths = {0, 50, 100};
    g.samples_per_cell = 2;
    g.tokens_to_generate = 32;
    for (const TextSample& s : niah_grid(g, word_count, essay)) {
      check_role_partition(s.roles, s.prompt.size());
      // Adjacent spans never share a role (they are merged).
      for (size_t i = 1; i < s.roles.size(); ++i) EXPECT_NE(s.roles[i - 1].role, s.roles[i].role);
      ASSERT_GE(s.roles.size(), 3u);
      // The instruction line, then the question with the answer prefix.
      EXPECT_EQ(s.roles.front().role, TokenRole::Other);
      EXPECT_EQ(text_of(s, s.roles.front()).back(), '\n');
      EXPECT_NE(text_of(s, s.roles.front()).find(" special magic "), std::string_view::npos);
      EXPECT_EQ(text_of(s, s.roles.front()).substr(text_of(s, s.roles.front()).size() - 12), "afterwards.\n");
      EXPECT_EQ(s.roles.back().role, TokenRole::Question);
      EXPECT_EQ(text_of(s, s.roles.back()).substr(0, 6), "\nWhat ");
      EXPECT_EQ(spans_of(s, TokenRole::Question).size(), 1u);
      EXPECT_EQ(spans_of(s, TokenRole::Other).size(), 1u);
      // Needles: one span per answer, each a needle sentence holding its answer.
      const auto needles = spans_of(s, TokenRole::Needle);
      ASSERT_EQ(needles.size(), s.answers.size());
      for (size_t i = 0; i < needles.size(); ++i) {
        EXPECT_EQ(needles[i].substr(0, 25), "One of the special magic ");
        EXPECT_EQ(needles[i].back(), '.');
        size_t holding = 0;
        for (const auto& a : s.answers) holding += needles[i].find(": " + a + ".") != std::string_view::npos;
        EXPECT_EQ(holding, 1u) << needles[i];
      }
      // Distractors: needle sentences holding no answer (3 for multikey_1, the haystack of
      // multikey_2/3), none elsewhere.
      const auto distractors = spans_of(s, TokenRole::Distractor);
      for (auto d : distractors) {
        EXPECT_EQ(d.substr(0, 25), "One of the special magic ");
        for (const auto& a : s.answers) EXPECT_EQ(d.find(a), std::string_view::npos);
      }
      if (name == "niah_multikey_1") EXPECT_EQ(distractors.size(), 3u);
      else if (name == "niah_multikey_2" || name == "niah_multikey_3") EXPECT_GT(distractors.size(), 3u);
      else EXPECT_TRUE(distractors.empty());
      // The haystack holds no needle text.
      for (auto h : spans_of(s, TokenRole::Haystack)) EXPECT_EQ(h.find("special magic"), std::string_view::npos);
      if (name != "niah_multikey_2" && name != "niah_multikey_3")
        EXPECT_FALSE(spans_of(s, TokenRole::Haystack).empty());
    }
  }
}

TEST(SyntheticRoles, PasskeyPromptRoles) {
  for (double depth : {0.0, 40.0, 100.0}) {
    PasskeyConfig c;
    c.max_seq_length = 300;
    c.depth_percent = depth;
    c.num_samples = 2;
    for (const TextSample& s : passkey(c, word_count)) {
      check_role_partition(s.roles, s.prompt.size());
      ASSERT_EQ(s.roles.size(), 5u);
      const auto& key = s.answers.at(0);
      EXPECT_EQ(text_of(s, s.roles[2]), "The pass key is " + key + ". Remember it. " + key + " is the pass key.");
      EXPECT_EQ(s.roles[2].role, TokenRole::Needle);
      EXPECT_EQ(s.roles[0].role, TokenRole::Other);
      EXPECT_EQ(text_of(s, s.roles[0]).substr(0, 12), "There is an ");
      EXPECT_EQ(s.roles[1].role, TokenRole::Haystack);
      EXPECT_EQ(s.roles[3].role, TokenRole::Haystack);
      EXPECT_EQ(s.roles[4].role, TokenRole::Question);
      EXPECT_EQ(text_of(s, s.roles[4]), "\nWhat is the pass key? The pass key is");
      // Byte tokens: as many roles as prompt bytes, needle bytes where the key sentence is.
      const std::vector<size_t> bytes(s.prompt.size(), 1);
      const auto roles = token_roles(s.roles, s.prompt.size(), bytes);
      ASSERT_EQ(roles.size(), s.prompt.size());
      EXPECT_EQ(roles[s.roles[2].begin], code(TokenRole::Needle));
      EXPECT_EQ(roles[s.roles[2].begin - 1], code(TokenRole::Haystack));
    }
  }
}

}  // namespace
}  // namespace amor::synthetic
