// Global L2 gradient norm and clipping, as torch.nn.utils.clip_grad_norm_(max_norm, norm_type=2):
//
//   total     = sqrt(sum over all tensors and elements of g^2)     (accumulated in double)
//   clip_coef = max_norm / (total + 1e-6)
//   if clip_coef < 1: g <- g * clip_coef for every gradient
//
// The sum of squares is the unit that shards add up (FSDP: each rank sums its shard, an
// all-reduce adds the partial sums, and every rank takes the same sqrt and coefficient).
// T is float or double.
#pragma once
#include <cstdint>

namespace amor::ref {

template <class T>
double sum_of_squares(const T* g, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return acc;
}

template <class T>
void scale(T* g, int64_t n, double coef) {
  const T c = static_cast<T>(coef);  // torch multiplies by the coefficient in the grads' dtype
  for (int64_t i = 0; i < n; ++i) g[i] *= c;
}

}  // namespace amor::ref
