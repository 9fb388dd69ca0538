// Tests of the portable sampling layer: the engine is the standard's mt19937_64, our integer draws
// are exact functions of its raw output, and the samplers are uniform and distinct.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/synthetic/rng.h"
#include "kernels/core/error.h"

namespace amor::synthetic {
namespace {

TEST(SyntheticRng, EngineIsTheStandardsMt19937_64) {
  // [rand.predef]: the 10000th output of a default-constructed mt19937_64 is 9981545732273789042.
  Rng r(5489u);  // the default seed
  uint64_t x = 0;
  for (int i = 0; i < 10000; ++i) x = r.next();
  EXPECT_EQ(x, 9981545732273789042ull);
}

TEST(SyntheticRng, BelowIsRawModuloWhenNotRejected) {
  // For n = 10 only raw values below (2^64 mod 10) = 6 are rejected; none occur in 1000 draws.
  Rng r(7);
  std::mt19937_64 raw(7);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(r.below(10), raw() % 10);
  // A power of two rejects nothing: the low bits.
  Rng r2(9);
  std::mt19937_64 raw2(9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r2.below(1024), raw2() & 1023);
}

TEST(SyntheticRng, BelowRejectsTheBiasedLowValues) {
  // n = 2^63 + 1: t = 2^64 mod n = 2^63 - 1, so about half the raw values are rejected and the
  // result is x mod n of the first accepted value.
  const uint64_t n = (1ull << 63) + 1, t = (0 - n) % n;
  ASSERT_EQ(t, (1ull << 63) - 1);
  Rng r(3);
  std::mt19937_64 raw(3);
  for (int i = 0; i < 50; ++i) {
    uint64_t x;
    do x = raw();
    while (x < t);
    EXPECT_EQ(r.below(n), x % n);
  }
}

TEST(SyntheticRng, UniformAndBetweenStayInRange) {
  Rng r(11);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const int64_t v = r.between(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    ++counts[static_cast<size_t>(v + 3)];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);  // 5 sigma is ~450
  EXPECT_EQ(r.between(5, 5), 5);
}

TEST(SyntheticRng, SampleDistinctIsAUniformPermutationPrefix) {
  for (uint64_t n : {10ull, 1000ull}) {  // dense and sparse paths
    Rng r(n);
    std::vector<int> first(static_cast<size_t>(n), 0);
    for (int rep = 0; rep < 2000; ++rep) {
      const auto s = r.sample_distinct(n, 5);
      ASSERT_EQ(s.size(), 5u);
      EXPECT_EQ(std::set<uint64_t>(s.begin(), s.end()).size(), 5u);
      for (uint64_t v : s) ASSERT_LT(v, n);
      ++first[static_cast<size_t>(s[0])];
    }
    if (n == 10) {
      for (int c : first) EXPECT_NEAR(c, 200, 70);
    }
  }
  Rng r(1);
  auto all = r.sample_distinct(6, 6);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(r.sample_distinct(3, 4), Error);
}

TEST(SyntheticRng, SameSeedSameStreamAndDerivedSeedsDiffer) {
  Rng a(derive_seed(1, {2, 3})), b(derive_seed(1, {2, 3}));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(derive_seed(1, {2, 3}), derive_seed(1, {3, 2}));
  EXPECT_NE(derive_seed(1, {0}), derive_seed(2, {0}));
  std::vector<int> v{1, 2, 3, 4, 5, 6, 7, 8};
  Rng s(4);
  s.shuffle(v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

}  // namespace
}  // namespace amor::synthetic
