#include "tests/common/random.h"

namespace amor::testing {

Tensor randn(const Shape& shape, uint64_t seed, DType dtype, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, scale);
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, dist(rng));
  return t;
}

Tensor uniform(const Shape& shape, uint64_t seed, double lo, double hi, DType dtype) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, dist(rng));
  return t;
}

Tensor randint(const Shape& shape, uint64_t seed, int64_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, n - 1);
  Tensor t = Tensor::empty(shape, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(dist(rng));
  return t;
}

Tensor bernoulli(const Shape& shape, uint64_t seed, double p) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution dist(p);
  Tensor t = Tensor::empty(shape, DType::U8);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = dist(rng) ? 1 : 0;
  return t;
}

}  // namespace amor::testing
