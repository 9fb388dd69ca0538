// The random numbers of the synthetic tasks: std::mt19937_64 plus our own sampling on its raw
// 64-bit output, so a seed gives the same data on every platform and standard library.
//
// std::mt19937_64's output sequence is fixed by the C++ standard, but
// std::uniform_int_distribution, std::shuffle, std::sample etc. are implementation-defined
// (libstdc++ and libc++ differ), so they are not used anywhere in data/synthetic. Integers are
// exact (rejection sampling), doubles are the top 53 bits of one draw.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

namespace amor::synthetic {

// splitmix64's finaliser: a bijective 64-bit mix, used to derive independent seeds.
uint64_t splitmix64(uint64_t x);

// A seed for one stream derived from a base seed and a list of coordinates (example index, grid
// cell...), so that example i can be generated without generating examples 0..i-1.
uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> parts);

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t next() { return engine_(); }
  // Uniform in [0, n), n >= 1; unbiased (rejects the low (2^64 mod n) values).
  uint64_t below(uint64_t n);
  // Uniform in [lo, hi] inclusive, lo <= hi.
  int64_t between(int64_t lo, int64_t hi);
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Fisher-Yates from the back, as Python's random.shuffle.
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }
  // k distinct values of [0, n) in random order (a uniformly random k-permutation), as
  // numpy's choice(n, k, replace=False).
  std::vector<uint64_t> sample_distinct(uint64_t n, uint64_t k);

 private:
  std::mt19937_64 engine_;
};

}  // namespace amor::synthetic
