// Well-conditioned random inputs for the gated delta rule's tests and oracle cases: unit-norm
// k rows (what the model's L2 norm hands the op), beta in (0,1), g in [-1, 0).
#pragma once
#include <cmath>

#include "kernels/core/tensor.h"
#include "tests/common/random.h"

namespace amor::testing {

struct GatedDeltaInputs {
  Tensor q, k, v, g, beta, s0;  // s0 undefined unless asked for
};

// Rows of the last dimension scaled to unit L2 norm (in double, then converted).
inline Tensor unit_rows(const Shape& shape, uint64_t seed, DType dt) {
  Tensor t = randn(shape, seed, DType::F64);
  const int64_t D = shape.back();
  double* p = t.data<double>();
  for (int64_t r = 0; r < t.numel() / D; ++r) {
    double n2 = 0;
    for (int64_t i = 0; i < D; ++i) n2 += p[r * D + i] * p[r * D + i];
    for (int64_t i = 0; i < D; ++i) p[r * D + i] /= std::sqrt(n2);
  }
  return t.to(dt);
}

inline GatedDeltaInputs gated_delta_inputs(int64_t B, int64_t T, int64_t H, int64_t K, int64_t V,
                                           bool with_state, uint64_t seed, DType dt = DType::F64,
                                           double g_lo = -1.0, double g_hi = -0.01) {
  GatedDeltaInputs x;
  x.q = unit_rows({B, T, H, K}, seed + 1, dt);
  x.k = unit_rows({B, T, H, K}, seed + 2, dt);
  x.v = randn({B, T, H, V}, seed + 3, dt);
  x.g = uniform({B, T, H}, seed + 4, g_lo, g_hi, dt);
  x.beta = uniform({B, T, H}, seed + 5, 0.05, 0.95, dt);
  if (with_state) x.s0 = randn({B, H, K, V}, seed + 6, dt, 0.5);
  return x;
}

}  // namespace amor::testing
