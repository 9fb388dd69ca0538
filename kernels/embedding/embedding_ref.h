// Token embedding lookup, W is [V, D]:
//
//   y[n, :] = W[ids[n], :]
//   dW[v, :] = sum over n with ids[n] == v of dy[n, :]     (scatter-add: repeated ids accumulate)
//
// ids are already range-checked by the caller (embedding.cpp). T is float or double.
#pragma once
#include <cstdint>

namespace amor::ref {

template <class T>
void embedding_forward(const int32_t* ids, const T* weight, T* y, int64_t n, int64_t d) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = weight[int64_t(ids[i]) * d + j];
}

// dw [vocab, d] is overwritten.
template <class T>
void embedding_backward(const int32_t* ids, const T* dy, T* dw, int64_t n, int64_t vocab,
                        int64_t d) {
  for (int64_t k = 0; k < vocab * d; ++k) dw[k] = T(0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) dw[int64_t(ids[i]) * d + j] += dy[i * d + j];
}

}  // namespace amor::ref
