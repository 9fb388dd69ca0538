// SwiGLU activation, the middle of the MLP  down(silu(gate(x)) * up(x)):
//
//   h = silu(g) * u,          silu(g) = g * sigmoid(g)
//   dg = dh * u * silu'(g),   silu'(g) = s * (1 + g * (1 - s)),  s = sigmoid(g)
//   du = dh * silu(g)
//
// Plain loops over n elements; T is float or double.
#pragma once
#include <cmath>
#include <cstdint>

namespace amor::ref {

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
void swiglu_forward(const T* g, const T* u, T* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] * sigmoid(g[i]) * u[i];
}

template <class T>
void swiglu_backward(const T* g, const T* u, const T* dh, T* dg, T* du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T s = sigmoid(g[i]);
    T silu = g[i] * s;
    dg[i] = dh[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
    du[i] = dh[i] * silu;
  }
}

}  // namespace amor::ref
