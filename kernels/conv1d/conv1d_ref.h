// Causal depthwise conv1d (+ optional SiLU), the short conv of Mamba2 and Gated DeltaNet.
//
// x [B,T,C], w [C,K], bias [C] (optional), state s0 [B,C,K-1] (optional; zeros when absent).
// Per (b, c) let xp be the padded sequence of length T+K-1: xp[p] = s0[b,c,p] for p < K-1 (the
// K-1 inputs before t=0, oldest first) and xp[K-1+t] = x[b,t,c]. Then
//
//   a[b,t,c] = bias[c] + sum_{j=0}^{K-1} w[c,j] * xp[t+j]        (pre-activation)
//   y[b,t,c] = silu(a) if silu else a
//   s1[b,c,i] = xp[T+i],  i < K-1                                (final state: last K-1 inputs)
//
// which is PyTorch's conv1d(groups=C, padding=K-1)[..., :T] with weight [C,1,K] when s0 = 0.
// Backward, with da = dy * silu'(a) (or dy), ds1 the gradient of the final state (may be absent):
//
//   dbias[c]  = sum_{b,t} da[b,t,c]
//   dw[c,j]   = sum_{b,t} da[b,t,c] * xp[t+j]
//   dxp[p]    = sum_{j, t=p-j in [0,T)} w[c,j] * da[b,t,c]  +  ds1[b,c,p-T] (for p >= T)
//   dx[b,t,c] = dxp[K-1+t],   ds0[b,c,p] = dxp[p]
//
// Decode step: with the state as xp's first K-1 entries and x_t as the last,
//   y_t = act(bias + sum_j w[c,j] * xp[j]),  state <- xp[1..K-1].
// Backward recomputes a from x and s0 rather than saving it. Plain loops; T is float or double.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace amor::ref {

template <class T>
inline T conv1d_sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
}

// xp[p] for one (b, c): the initial state (or zero) before t=0, x after.
template <class T>
void conv1d_padded(const T* x, const T* s0, int64_t b, int64_t c, int64_t T_, int64_t C,
                   int64_t K, std::vector<T>& xp) {
  xp.assign(static_cast<size_t>(T_ + K - 1), T(0));
  for (int64_t p = 0; p < K - 1; ++p) xp[p] = s0 ? s0[(b * C + c) * (K - 1) + p] : T(0);
  for (int64_t t = 0; t < T_; ++t) xp[K - 1 + t] = x[(b * T_ + t) * C + c];
}

// s0 and bias may be null. y [B,T,C], s1 [B,C,K-1].
template <class T>
void conv1d_forward(const T* x, const T* w, const T* bias, const T* s0, bool silu, T* y, T* s1,
                    int64_t B, int64_t T_, int64_t C, int64_t K) {
  std::vector<T> xp;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      conv1d_padded(x, s0, b, c, T_, C, K, xp);
      for (int64_t t = 0; t < T_; ++t) {
        T a = bias ? bias[c] : T(0);
        for (int64_t j = 0; j < K; ++j) a += w[c * K + j] * xp[t + j];
        y[(b * T_ + t) * C + c] = silu ? a * conv1d_sigmoid(a) : a;
      }
      for (int64_t i = 0; i < K - 1; ++i) s1[(b * C + c) * (K - 1) + i] = xp[T_ + i];
    }
  }
}

// s0, bias, ds1 may be null; dbias is written only when bias is given, ds0 only when s0 is.
template <class T>
void conv1d_backward(const T* x, const T* w, const T* bias, const T* s0, bool silu, const T* dy,
                     const T* ds1, T* dx, T* dw, T* dbias, T* ds0, int64_t B, int64_t T_,
                     int64_t C, int64_t K) {
  for (int64_t i = 0; i < C * K; ++i) dw[i] = T(0);
  if (bias)
    for (int64_t c = 0; c < C; ++c) dbias[c] = T(0);
  std::vector<T> xp, dxp;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      conv1d_padded(x, s0, b, c, T_, C, K, xp);
      dxp.assign(xp.size(), T(0));
      for (int64_t i = 0; i < K - 1; ++i)
        if (ds1) dxp[T_ + i] += ds1[(b * C + c) * (K - 1) + i];
      for (int64_t t = 0; t < T_; ++t) {
        T da = dy[(b * T_ + t) * C + c];
        if (silu) {
          T a = bias ? bias[c] : T(0);
          for (int64_t j = 0; j < K; ++j) a += w[c * K + j] * xp[t + j];
          T s = conv1d_sigmoid(a);
          da *= s * (T(1) + a * (T(1) - s));
        }
        if (bias) dbias[c] += da;
        for (int64_t j = 0; j < K; ++j) {
          dw[c * K + j] += da * xp[t + j];
          dxp[t + j] += w[c * K + j] * da;
        }
      }
      for (int64_t t = 0; t < T_; ++t) dx[(b * T_ + t) * C + c] = dxp[K - 1 + t];
      if (s0)
        for (int64_t p = 0; p < K - 1; ++p) ds0[(b * C + c) * (K - 1) + p] = dxp[p];
    }
  }
}

// One decode step: x_t [B,C], state [B,C,K-1] updated in place, y_t [B,C]. bias may be null.
template <class T>
void conv1d_step(const T* x_t, T* state, const T* w, const T* bias, bool silu, T* y_t, int64_t B,
                 int64_t C, int64_t K) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      T* s = state + (b * C + c) * (K - 1);
      T xt = x_t[b * C + c];
      T a = bias ? bias[c] : T(0);
      for (int64_t j = 0; j < K - 1; ++j) a += w[c * K + j] * s[j];
      a += w[c * K + K - 1] * xt;
      y_t[b * C + c] = silu ? a * conv1d_sigmoid(a) : a;
      for (int64_t j = 0; j + 1 < K - 1; ++j) s[j] = s[j + 1];
      if (K > 1) s[K - 2] = xt;
    }
  }
}

}  // namespace amor::ref
