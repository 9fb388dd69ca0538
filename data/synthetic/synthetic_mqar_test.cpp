// MQAR: Zoology's layout invariants, the power law of the query gaps, determinism and the
// parameter errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "data/synthetic/mqar.h"
#include "data/synthetic/token_roles.h"

namespace amor::synthetic {
namespace {

std::vector<int32_t> row(const Tensor& t, int64_t i) {
  const int64_t T = t.size(1);
  const int32_t* p = t.data<int32_t>() + i * T;
  return std::vector<int32_t>(p, p + T);
}

void expect_error(const MqarConfig& c, const std::string& needle) {
  try {
    mqar(c);
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Vocabulary 512, 128 positions, 16 pairs.
MqarConfig config_v512(bool random_fill, int64_t examples, uint64_t seed) {
  MqarConfig c;
  c.vocab_size = 512;
  c.input_seq_len = 128;
  c.num_kv_pairs = 16;
  c.num_examples = examples;
  c.random_non_queries = random_fill;
  c.seed = seed;
  return c;
}

TEST(SyntheticMqar, LayoutMatchesZoology) {
  for (bool random_fill : {false, true}) {
    const MqarConfig c = config_v512(random_fill, 200, 3);
    const TokenTask t = mqar(c);
    ASSERT_EQ(t.tokens.shape(), (Shape{200, 128}));
    ASSERT_EQ(t.targets.shape(), (Shape{200, 128}));
    ASSERT_EQ(t.tokens.dtype(), DType::I32);
    const int64_t k = c.num_kv_pairs, half = c.vocab_size / 2;
    for (int64_t e = 0; e < c.num_examples; ++e) {
      const auto x = row(t.tokens, e), y = row(t.targets, e);
      std::map<int32_t, int32_t> kv;
      std::set<int32_t> values;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t key = x[2 * j], value = x[2 * j + 1];
        EXPECT_GE(key, 1);  // keys from [1, V/2), values from [V/2, V): disjoint halves
        EXPECT_LT(key, half);
        EXPECT_GE(value, half);
        EXPECT_LT(value, c.vocab_size);
        EXPECT_TRUE(kv.emplace(key, value).second) << "repeated key";
        EXPECT_TRUE(values.insert(value).second) << "repeated value";
        EXPECT_EQ(y[2 * j], kIgnore);
        EXPECT_EQ(y[2 * j + 1], kIgnore);
      }
      std::set<int32_t> queried;
      int64_t labels = 0;
      for (int64_t pos = 2 * k; pos < c.input_seq_len; ++pos) {
        if (y[pos] == kIgnore) {
          if (!random_fill) {
            EXPECT_EQ(x[pos], 0) << "filler must be 0 without random_non_queries";
          }
          EXPECT_GE(x[pos], 0);
          EXPECT_LT(x[pos], c.vocab_size);
          continue;
        }
        ++labels;
        EXPECT_EQ((pos - 2 * k) % 2, 0) << "queries sit at even offsets after the pairs";
        ASSERT_TRUE(kv.count(x[pos])) << "a labelled position must hold a key";
        EXPECT_EQ(y[pos], kv[x[pos]]) << "a query's target is its key's value";
        EXPECT_TRUE(queried.insert(x[pos]).second) << "each key is queried once";
      }
      EXPECT_EQ(labels, k);
    }
  }
}

TEST(SyntheticMqar, RandomFillCoversTheVocabulary) {
  MqarConfig c;
  c.vocab_size = 128;
  c.input_seq_len = 64;
  c.num_kv_pairs = 4;
  c.num_examples = 300;
  const TokenTask t = mqar(c);
  std::set<int32_t> seen;
  const auto x = t.tokens.to_vector<int32_t>(), y = t.targets.to_vector<int32_t>();
  for (size_t i = 0; i < x.size(); ++i)
    if (y[i] == kIgnore && static_cast<int64_t>(i) % 64 >= 8) seen.insert(x[i]);
  EXPECT_EQ(seen.size(), 128u) << "filler should be uniform over all of [0, V)";
}

// With power_a = a, P(gap = g) is proportional to (g+1)^(a-1). The gap of the first pair is the
// first draw of the sampler, so its marginal is exactly that distribution for any num_kv_pairs.
void check_first_gap(double power_a, int64_t k) {
  MqarConfig c;
  c.vocab_size = 256;
  c.input_seq_len = 64;
  c.num_kv_pairs = k;
  c.num_examples = 20000;
  c.power_a = power_a;
  c.random_non_queries = false;
  c.seed = 17;
  const TokenTask t = mqar(c);
  const int64_t space = (c.input_seq_len - 2 * k) / 2;
  std::vector<double> p(static_cast<size_t>(space));
  double z = 0;
  for (int64_t g = 0; g < space; ++g) z += p[g] = std::pow(g + 1.0, power_a - 1.0);
  std::vector<int> hist(static_cast<size_t>(space), 0);
  for (int64_t e = 0; e < c.num_examples; ++e) {
    const auto x = row(t.tokens, e);
    const int32_t key0 = x[0];
    for (int64_t g = 0; g < space; ++g)
      if (x[2 * k + 2 * g] == key0) ++hist[g];
  }
  for (int64_t g = 0; g < space; ++g) {
    const double pg = p[g] / z, n = static_cast<double>(c.num_examples);
    EXPECT_NEAR(hist[g] / n, pg, 5 * std::sqrt(pg * (1 - pg) / n) + 1e-4)
        << "gap " << g << " power_a " << power_a << " k " << k;
  }
}

TEST(SyntheticMqar, QueryGapsFollowThePowerLaw) {
  check_first_gap(0.01, 1);
  check_first_gap(0.01, 4);
  check_first_gap(1.0, 4);  // power_a = 1 is uniform, as Zoology's docstring says
}

TEST(SyntheticMqar, PowerLawFavoursShortGapsOverall) {
  MqarConfig c;
  c.vocab_size = 1024;
  c.input_seq_len = 256;
  c.num_kv_pairs = 8;
  c.num_examples = 2000;
  const TokenTask t = mqar(c);
  const auto y = t.targets.to_vector<int32_t>();
  int64_t near = 0, far = 0;  // query gaps in the first vs last quarter of the space
  const int64_t space = (256 - 16) / 2;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == kIgnore) continue;
    const int64_t gap = (static_cast<int64_t>(i % 256) - 16) / 2;
    near += gap < space / 4;
    far += gap >= 3 * space / 4;
  }
  EXPECT_GT(near, 2 * far);
}

TEST(SyntheticMqar, DeterministicBySeedAndSliceable) {
  MqarConfig c;
  c.vocab_size = 300;
  c.input_seq_len = 32;
  c.num_kv_pairs = 4;
  c.num_examples = 10;
  c.seed = 5;
  const TokenTask a = mqar(c), b = mqar(c);
  EXPECT_EQ(a.tokens.to_vector<int32_t>(), b.tokens.to_vector<int32_t>());
  EXPECT_EQ(a.targets.to_vector<int32_t>(), b.targets.to_vector<int32_t>());
  c.seed = 6;
  EXPECT_NE(mqar(c).tokens.to_vector<int32_t>(), a.tokens.to_vector<int32_t>());
  // Examples 4..6 generated alone equal rows 4..6 of the full set.
  c.seed = 5;
  c.first_example = 4;
  c.num_examples = 3;
  const TokenTask s = mqar(c);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(row(s.tokens, i), row(a.tokens, 4 + i));
    EXPECT_EQ(row(s.targets, i), row(a.targets, 4 + i));
  }
}

// The lm form (answers_in_input, next_token_targets): the same pairs, queries and filler as
// Zoology's layout with each query's value written after it; the targets are the next tokens, and
// the roles those of the query-only targets with the answers marked.
TEST(SyntheticMqar, LmFormEchoesAnswersAndTargetsEveryNextToken) {
  for (bool random_fill : {false, true}) {
    MqarConfig c = config_v512(random_fill, 50, 11);
    const TokenTask zoology = mqar(c);
    c.answers_in_input = true;
    const TokenTask answers = mqar(c);
    c.next_token_targets = true;
    const TokenTask lm = mqar(c);
    EXPECT_EQ(answers.tokens.to_vector<int32_t>(), lm.tokens.to_vector<int32_t>());
    EXPECT_EQ(answers.targets.to_vector<int32_t>(), zoology.targets.to_vector<int32_t>());
    EXPECT_EQ(answers.roles.to_vector<uint8_t>(), lm.roles.to_vector<uint8_t>());
    const int64_t T = c.input_seq_len;
    const auto roles = lm.roles.to_vector<uint8_t>();
    for (int64_t e = 0; e < c.num_examples; ++e) {
      const auto xz = row(zoology.tokens, e), yz = row(zoology.targets, e);
      const auto x = row(lm.tokens, e), y = row(lm.targets, e);
      int64_t echoed = 0;
      for (int64_t t = 0; t < T; ++t) {
        const bool answer = t > 0 && yz[t - 1] != kIgnore;
        const auto role = static_cast<TokenRole>(roles[static_cast<size_t>(e * T + t)]);
        if (answer) {
          ++echoed;
          EXPECT_EQ(x[t], yz[t - 1]) << "the value follows its query";
          EXPECT_EQ(role, TokenRole::Answer);
        } else {
          // Without random fill every other position is Zoology's token (with it, the answers
          // take positions the fill would draw for, so the later draws shift).
          if (!random_fill) {
            EXPECT_EQ(x[t], xz[t]);
          }
          EXPECT_NE(role, TokenRole::Answer);
        }
        EXPECT_EQ(y[t], t + 1 < T ? x[t + 1] : kIgnore) << "position " << t;
      }
      EXPECT_EQ(echoed, c.num_kv_pairs);
      for (int64_t j = 0; j < 2 * c.num_kv_pairs; ++j) EXPECT_EQ(x[j], xz[j]) << "the pairs are unchanged";
    }
  }
}

// pair_targets false: the lm form's tokens, roles and targets, except that the pairs (positions
// 0 .. 2k-1) have no target; every later position keeps its next token.
TEST(SyntheticMqar, LmFormWithoutPairTargets) {
  MqarConfig c = config_v512(false, 20, 5);
  c.answers_in_input = c.next_token_targets = true;
  const TokenTask lm = mqar(c);
  c.pair_targets = false;
  const TokenTask masked = mqar(c);
  EXPECT_EQ(lm.tokens.to_vector<int32_t>(), masked.tokens.to_vector<int32_t>());
  EXPECT_EQ(lm.roles.to_vector<uint8_t>(), masked.roles.to_vector<uint8_t>());
  const int64_t T = c.input_seq_len, k = c.num_kv_pairs;
  for (int64_t e = 0; e < c.num_examples; ++e) {
    const auto y = row(lm.targets, e), ym = row(masked.targets, e);
    for (int64_t t = 0; t < T; ++t) EXPECT_EQ(ym[t], t < 2 * k ? kIgnore : y[t]) << "position " << t;
  }
}

TEST(SyntheticMqar, BadParametersNameTheParameter) {
  MqarConfig c;
  c.vocab_size = 100;
  c.input_seq_len = 64;
  c.num_kv_pairs = 4;
  c.num_examples = 2;
  auto with = [&](auto f) {
    MqarConfig d = c;
    f(d);
    return d;
  };
  expect_error(with([](auto& d) { d.num_kv_pairs = 17; }),
               "num_kv_pairs 17 does not fit input_seq_len 64");
  expect_error(with([](auto& d) { d.input_seq_len = 63; }), "input_seq_len must be even");
  expect_error(with([](auto& d) { d.vocab_size = 64; }),
               "vocab_size 64 must exceed input_seq_len 64");
  expect_error(with([](auto& d) { d.num_kv_pairs = 0; }), "num_kv_pairs must be at least 1");
  expect_error(with([](auto& d) { d.num_examples = 0; }), "num_examples must be at least 1");
  expect_error(with([](auto& d) { d.power_a = 0; }), "power_a must be a positive number");
  expect_error(with([](auto& d) { d.first_example = -1; }), "first_example must be >= 0");
  expect_error(with([](auto& d) { d.next_token_targets = true; }),
               "next_token_targets needs answers_in_input");
  expect_error(with([](auto& d) { d.pair_targets = false; }), "pair_targets false needs next_token_targets");
}

}  // namespace
}  // namespace amor::synthetic
