// Portable sampling on std::mt19937_64 (see rng.h for why no std:: distributions).
#include "data/synthetic/rng.h"

#include <unordered_set>

#include "kernels/core/error.h"

namespace amor::synthetic {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> parts) {
  uint64_t h = splitmix64(seed);
  for (uint64_t p : parts) h = splitmix64(h ^ splitmix64(p + 0x632be59bd9b4e019ull));
  return h;
}

uint64_t Rng::below(uint64_t n) {
  AMOR_CHECK(n >= 1, "Rng::below: n must be at least 1");
  // Values below (2^64 mod n) would make the low residues more likely; [t, 2^64) holds every
  // residue equally often.
  const uint64_t t = (0 - n) % n;
  uint64_t x;
  do x = engine_();
  while (x < t);
  return x % n;
}

int64_t Rng::between(int64_t lo, int64_t hi) {
  AMOR_CHECK(lo <= hi, "Rng::between: empty range [{}, {}]", lo, hi);
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  const uint64_t r = span == UINT64_MAX ? engine_() : below(span + 1);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + r);
}

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

std::vector<uint64_t> Rng::sample_distinct(uint64_t n, uint64_t k) {
  AMOR_CHECK(k <= n, "Rng::sample_distinct: cannot draw {} distinct values from {}", k, n);
  std::vector<uint64_t> out;
  out.reserve(k);
  if (k * 4 >= n) {
    // Dense: a partial Fisher-Yates over the whole range.
    std::vector<uint64_t> pool(n);
    for (uint64_t i = 0; i < n; ++i) pool[i] = i;
    for (uint64_t i = 0; i < k; ++i) {
      std::swap(pool[i], pool[i + below(n - i)]);
      out.push_back(pool[i]);
    }
    return out;
  }
  // Sparse: draw and reject repeats; the accepted sequence is a uniform k-permutation.
  std::unordered_set<uint64_t> seen;
  while (out.size() < k) {
    uint64_t x = below(n);
    if (seen.insert(x).second) out.push_back(x);
  }
  return out;
}

}  // namespace amor::synthetic
