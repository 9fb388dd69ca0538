// Cross-platform determinism: an independent Python re-implementation of the documented sampling
// (portable_reference.py: mt19937_64 written out from the standard, splitmix64 seeds, rejection
// sampling, the power-law sampler) must reproduce the C++ MQAR and copying data token for token.
// If a standard library's distributions had crept in, this would fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "data/json/json.h"
#include "data/synthetic/copying.h"
#include "data/synthetic/mqar.h"

namespace amor::synthetic {
namespace {

json::Value run_reference(const std::string& args) {
  const std::string cmd = std::string(AMOR_PYTHON) + " '" + AMOR_SOURCE_DIR +
                          "/data/synthetic/portable_reference.py' " + args;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) throw Error("cannot run " + cmd);
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
  const int status = pclose(pipe.release());
  if (status != 0) throw Error(fmt::format("{} exited with status {}", cmd, status));
  return json::parse(out, "portable_reference.py");
}

void expect_same(const TokenTask& t, const json::Value& ref) {
  const auto& tok = ref.at("tokens").as_array();
  const auto& tgt = ref.at("targets").as_array();
  ASSERT_EQ(static_cast<int64_t>(tok.size()), t.tokens.size(0));
  const int64_t T = t.tokens.size(1);
  const auto x = t.tokens.to_vector<int32_t>(), y = t.targets.to_vector<int32_t>();
  for (size_t i = 0; i < tok.size(); ++i) {
    const auto& rx = tok[i].as_array();
    const auto& ry = tgt[i].as_array();
    ASSERT_EQ(static_cast<int64_t>(rx.size()), T);
    for (int64_t p = 0; p < T; ++p) {
      ASSERT_EQ(x[i * T + p], rx[p].as_int()) << "tokens[" << i << "," << p << "]";
      ASSERT_EQ(y[i * T + p], ry[p].as_int()) << "targets[" << i << "," << p << "]";
    }
  }
}

TEST(SyntheticPortable, ReferenceEngineMatchesTheStandard) { run_reference("selfcheck"); }

TEST(SyntheticPortable, MqarEqualsTheIndependentReference) {
  struct Case {
    int64_t V, T, k, n;
    double a;
    bool fill;
    uint64_t seed;
    int64_t first;
  };
  // Sparse and dense key draws (k*4 vs V/2), both fills, a uniform power law, an offset slice.
  for (const Case& c :
       {Case{8192, 64, 4, 8, 0.01, true, 0, 0}, Case{64, 32, 8, 8, 0.01, false, 7, 3},
        Case{512, 256, 64, 3, 1.0, true, 123456789, 10}}) {
    MqarConfig m;
    m.vocab_size = c.V;
    m.input_seq_len = c.T;
    m.num_kv_pairs = c.k;
    m.num_examples = c.n;
    m.power_a = c.a;
    m.random_non_queries = c.fill;
    m.seed = c.seed;
    m.first_example = c.first;
    expect_same(mqar(m), run_reference(fmt::format("mqar {} {} {} {} {} {} {} {}", c.V, c.T, c.k,
                                                   c.n, c.a, c.fill ? 1 : 0, c.seed, c.first)));
  }
}

TEST(SyntheticPortable, CopyingEqualsTheIndependentReference) {
  CopyingConfig c;
  c.vocab_size = 50;
  c.copy_length = 16;
  c.num_examples = 5;
  c.seed = 99;
  c.first_example = 2;
  expect_same(copying(c), run_reference("copying 50 16 5 99 2"));
}

}  // namespace
}  // namespace amor::synthetic
