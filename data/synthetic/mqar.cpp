// MQAR generation (see mqar.h for the layout and its source).
#include "data/synthetic/mqar.h"

#include <cmath>
#include <vector>

#include "data/synthetic/rng.h"
#include "data/synthetic/token_roles.h"

namespace amor::synthetic {
namespace {

void validate(const MqarConfig& c) {
  AMOR_CHECK(c.num_kv_pairs >= 1, "mqar: num_kv_pairs must be at least 1, got {}", c.num_kv_pairs);
  AMOR_CHECK(c.num_examples >= 1, "mqar: num_examples must be at least 1, got {}", c.num_examples);
  AMOR_CHECK(c.first_example >= 0, "mqar: first_example must be >= 0, got {}", c.first_example);
  AMOR_CHECK(c.input_seq_len >= 4 && c.input_seq_len % 2 == 0,
             "mqar: input_seq_len must be even and at least 4, got {}", c.input_seq_len);
  AMOR_CHECK(
      c.num_kv_pairs * 4 <= c.input_seq_len,
      "mqar: num_kv_pairs {} does not fit input_seq_len {}: the pairs and their queries need "
      "4 * num_kv_pairs = {} positions",
      c.num_kv_pairs, c.input_seq_len, c.num_kv_pairs * 4);
  AMOR_CHECK(c.vocab_size > c.input_seq_len,
             "mqar: vocab_size {} must exceed input_seq_len {} (as Zoology requires)", c.vocab_size,
             c.input_seq_len);
  AMOR_CHECK(c.vocab_size <= INT32_MAX, "mqar: vocab_size {} does not fit i32 tokens",
             c.vocab_size);
  AMOR_CHECK(c.num_kv_pairs <= c.vocab_size / 2 - 1,
             "mqar: num_kv_pairs {} exceeds the {} distinct keys of vocab_size {}", c.num_kv_pairs,
             c.vocab_size / 2 - 1, c.vocab_size);
  AMOR_CHECK(std::isfinite(c.power_a) && c.power_a > 0,
             "mqar: power_a must be a positive number, got {}", c.power_a);
  AMOR_CHECK(!c.next_token_targets || c.answers_in_input,
             "mqar: next_token_targets needs answers_in_input (a query's next token must be its value)");
  AMOR_CHECK(c.pair_targets || c.next_token_targets,
             "mqar: pair_targets false needs next_token_targets (only then are the pairs trained)");
}

// Weighted draws without replacement (successive sampling: each draw picks among the remaining
// gaps in proportion to their weights, which is the distribution numpy's choice(p=, replace=False)
// produces). A segment tree whose internal nodes are recomputed as the sum of their children, so
// a removed gap has exactly zero weight and each draw costs O(log space).
class GapSampler {
 public:
  GapSampler(int64_t space, double power_a) : space_(space) {
    while (leaves_ < space) leaves_ *= 2;
    base_.assign(2 * leaves_, 0.0);
    for (int64_t g = 0; g < space; ++g)
      base_[leaves_ + g] = std::pow(static_cast<double>(g + 1), power_a - 1.0);
    for (int64_t i = leaves_ - 1; i >= 1; --i) base_[i] = base_[2 * i] + base_[2 * i + 1];
  }

  // k distinct gaps in draw order.
  std::vector<int64_t> draw(Rng& rng, int64_t k) const {
    std::vector<double> tree = base_;
    std::vector<int64_t> out;
    out.reserve(static_cast<size_t>(k));
    while (static_cast<int64_t>(out.size()) < k) {
      double u = rng.uniform() * tree[1];
      int64_t node = 1;
      while (node < leaves_) {
        if (u < tree[2 * node]) {
          node = 2 * node;
        } else {
          u -= tree[2 * node];
          node = 2 * node + 1;
        }
      }
      // Rounding in u -= ... can walk onto a zero leaf with probability ~1e-16: draw again.
      if (node - leaves_ >= space_ || tree[node] == 0.0) continue;
      out.push_back(node - leaves_);
      tree[node] = 0.0;
      for (int64_t i = node / 2; i >= 1; i /= 2) tree[i] = tree[2 * i] + tree[2 * i + 1];
    }
    return out;
  }

 private:
  int64_t space_;
  int64_t leaves_ = 1;
  std::vector<double> base_;
};

}  // namespace

TokenTask mqar(const MqarConfig& c) {
  validate(c);
  const int64_t T = c.input_seq_len, k = c.num_kv_pairs, V = c.vocab_size;
  const int64_t context = 2 * k;
  const int64_t key_vocab = V / 2;
  const GapSampler gaps(/*space=*/(T - context) / 2, c.power_a);

  std::vector<int32_t> tokens(static_cast<size_t>(c.num_examples * T), 0);
  std::vector<int32_t> targets(tokens.size(), kIgnore);
  for (int64_t e = 0; e < c.num_examples; ++e) {
    Rng rng(derive_seed(c.seed, {static_cast<uint64_t>(c.first_example + e)}));
    int32_t* x = tokens.data() + e * T;
    int32_t* y = targets.data() + e * T;
    const auto keys =
        rng.sample_distinct(static_cast<uint64_t>(key_vocab - 1), static_cast<uint64_t>(k));
    const auto values =
        rng.sample_distinct(static_cast<uint64_t>(V - key_vocab), static_cast<uint64_t>(k));
    const auto g = gaps.draw(rng, k);
    for (int64_t j = 0; j < k; ++j) {
      const auto key = static_cast<int32_t>(1 + keys[j]);
      const auto value = static_cast<int32_t>(key_vocab + static_cast<int64_t>(values[j]));
      x[2 * j] = key;
      x[2 * j + 1] = value;
      const int64_t query = context + 2 * g[j];
      x[query] = key;
      y[query] = value;
      if (c.answers_in_input) x[query + 1] = value;  // query <= T - 2: the gaps lie in [0, (T-2k)/2)
    }
    if (c.random_non_queries)
      for (int64_t t = 0; t < T; ++t)
        if (x[t] == 0) x[t] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
  }
  std::vector<uint8_t> roles;
  roles.reserve(tokens.size());
  for (int64_t e = 0; e < c.num_examples; ++e) {
    const auto r = mqar_roles(std::span<const int32_t>(targets.data() + e * T, static_cast<size_t>(T)), k,
                              c.answers_in_input);
    roles.insert(roles.end(), r.begin(), r.end());
  }
  if (c.next_token_targets)
    for (int64_t e = 0; e < c.num_examples; ++e)
      for (int64_t t = 0; t < T; ++t)
        targets[static_cast<size_t>(e * T + t)] =
            t + 1 < T && (c.pair_targets || t >= 2 * k) ? tokens[static_cast<size_t>(e * T + t + 1)] : kIgnore;
  return {Tensor::from_vector<int32_t>({c.num_examples, T}, tokens),
          Tensor::from_vector<int32_t>({c.num_examples, T}, targets),
          Tensor::from_vector<uint8_t>({c.num_examples, T}, roles)};
}

}  // namespace amor::synthetic
