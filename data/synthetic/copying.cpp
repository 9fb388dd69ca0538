// Copying-task generation (see copying.h).
#include "data/synthetic/copying.h"

#include <vector>

#include "data/synthetic/rng.h"

namespace amor::synthetic {

TokenTask copying(const CopyingConfig& c) {
  AMOR_CHECK(c.vocab_size >= 2 && c.vocab_size <= INT32_MAX,
             "copying: vocab_size must be in [2, 2^31), got {} (one token is the separator)",
             c.vocab_size);
  AMOR_CHECK(c.copy_length >= 1, "copying: copy_length must be at least 1, got {}", c.copy_length);
  AMOR_CHECK(c.num_examples >= 1, "copying: num_examples must be at least 1, got {}",
             c.num_examples);
  AMOR_CHECK(c.first_example >= 0, "copying: first_example must be >= 0, got {}", c.first_example);
  const int64_t L = c.copy_length, T = 2 * L;
  const auto sep = static_cast<int32_t>(c.vocab_size - 1);
  std::vector<int32_t> tokens(static_cast<size_t>(c.num_examples * T));
  std::vector<int32_t> targets(tokens.size(), kIgnore);
  std::vector<int32_t> s(static_cast<size_t>(L));
  for (int64_t e = 0; e < c.num_examples; ++e) {
    Rng rng(derive_seed(c.seed, {static_cast<uint64_t>(c.first_example + e)}));
    for (auto& v : s) v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.vocab_size - 1)));
    int32_t* x = tokens.data() + e * T;
    int32_t* y = targets.data() + e * T;
    for (int64_t i = 0; i < L; ++i) x[i] = s[i];
    x[L] = sep;
    for (int64_t i = 0; i + 1 < L; ++i) x[L + 1 + i] = s[i];
    for (int64_t i = 0; i < L; ++i) y[L + i] = s[i];
  }
  return {Tensor::from_vector<int32_t>({c.num_examples, T}, tokens),
          Tensor::from_vector<int32_t>({c.num_examples, T}, targets)};
}

}  // namespace amor::synthetic
