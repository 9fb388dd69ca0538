// Small elementwise ops the models need between the big ones (plain loops, float/double):
//
//   add:            y = a + b                         (residual streams)
//   add_:           a += alpha * b                    (gradient accumulation)
//   mul:            y = a * b;  da = dy*b, db = dy*a   (gates)
//   sigmoid:        y = 1/(1+exp(-x));  dx = dy*y*(1-y)          (GDN's beta, AMOR's alpha)
//   silu:           y = x*sigmoid(x);   dx = dy*s*(1+x(1-s))
//   bias_softplus:  y = softplus(x + bias[c]) over the last dim c   (Mamba2/GDN's dt)
//                   dx = dy*sigmoid(x+bias), dbias[c] = sum over rows of dx
//                   softplus(z) = log1p(exp(z)) computed as max(z,0) + log1p(exp(-|z|)) (no overflow)
//   channel_scale:  y = x * s[c] over the last dim c;  dx = dy*s[c], ds[c] = sum_rows dy*x
#pragma once
#include <cmath>
#include <cstdint>

namespace amor::ref {

template <class T>
inline T softplus(T z) {
  return std::max(z, T(0)) + std::log1p(std::exp(-std::abs(z)));
}

template <class T>
inline T sigmoid_of(T z) {
  return T(1) / (T(1) + std::exp(-z));
}

template <class T>
void bias_softplus_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = softplus(x[r * c + j] + bias[j]);
}

template <class T>
void bias_softplus_backward(const T* x, const T* bias, const T* dy, T* dx, T* dbias, int64_t rows,
                            int64_t c) {
  for (int64_t j = 0; j < c; ++j) dbias[j] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) {
      T g = dy[r * c + j] * sigmoid_of(x[r * c + j] + bias[j]);
      dx[r * c + j] = g;
      dbias[j] += g;
    }
}

template <class T>
void channel_scale_forward(const T* x, const T* s, T* y, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = x[r * c + j] * s[j];
}

template <class T>
void channel_scale_backward(const T* x, const T* s, const T* dy, T* dx, T* ds, int64_t rows,
                            int64_t c) {
  for (int64_t j = 0; j < c; ++j) ds[j] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) {
      dx[r * c + j] = dy[r * c + j] * s[j];
      ds[j] += dy[r * c + j] * x[r * c + j];
    }
}

}  // namespace amor::ref
