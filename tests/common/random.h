// Deterministic random tensors for tests (CPU). Fresh inputs per case; never zeros.
#pragma once
#include <cstdint>
#include <random>

#include "kernels/core/tensor.h"

namespace amor::testing {

// Normal(0, scale) entries.
Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::F64, double scale = 1.0);
// Uniform [lo, hi) entries.
Tensor uniform(const Shape& shape, uint64_t seed, double lo, double hi, DType dtype = DType::F64);
// Integer ids in [0, n) as i32.
Tensor randint(const Shape& shape, uint64_t seed, int64_t n);
// Bernoulli(p) 0/1 entries as u8.
Tensor bernoulli(const Shape& shape, uint64_t seed, double p);

}  // namespace amor::testing
