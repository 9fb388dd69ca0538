// Portable seeded permutation (see permutation.h).
#include "data/loader/permutation.h"

#include <numeric>
#include <utility>

#include "kernels/core/error.h"

namespace amor::data {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace {

// Uniform in [0, bound) without modulo bias (Lemire, "Fast random integer generation in an interval").
uint64_t bounded(uint64_t& state, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
  auto low = static_cast<uint64_t>(m);
  if (low < bound) {
    uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(splitmix64(state)) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace

std::vector<uint32_t> seeded_permutation(uint64_t n, uint64_t seed) {
  AMOR_CHECK(n <= UINT32_MAX, "seeded_permutation: {} sequences is more than 2^32-1", n);
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), uint32_t{0});
  uint64_t state = seed;
  for (uint64_t i = n; i > 1; --i) std::swap(p[i - 1], p[bounded(state, i)]);
  return p;
}

}  // namespace amor::data
