// A seeded random permutation of 0..n-1 that is the same on every machine and compiler.
//
// std::shuffle and the std distributions are implementation-defined, so a run resumed on another
// machine (or built with another standard library) would read other sequences; this is a plain
// Fisher-Yates shuffle driven by SplitMix64 with unbiased bounded draws (Lemire's method).
#pragma once
#include <cstdint>
#include <vector>

namespace amor::data {

uint64_t splitmix64(uint64_t& state);

// Deterministic in (n, seed): the order of sequences of one epoch. 32-bit entries keep it at
// 4 bytes per sequence (n < 2^32, i.e. up to ~8T tokens at 2048-token sequences).
std::vector<uint32_t> seeded_permutation(uint64_t n, uint64_t seed);

}  // namespace amor::data
