// Causal softmax attention with grouped KV heads (GQA) and an optional per-query gate.
//
// q [B,Tq,H,D], k,v [B,Tk,Hkv,D], G = H / Hkv: query head h reads kv head g = h / G. The Tq
// queries are the last Tq of the Tk positions: query i sits at i + (Tk - Tq) and sees keys
// j <= i + (Tk - Tq) (Tq = Tk: ordinary causal attention; Tq = 1: one decode step on a cache).
// For a firing row (b, i) (gate absent or gate[b,i] != 0) and each head h:
//
//   s_j   = scale * <q[b,i,h], k[b,j,g]>                   j = 0 .. i + Tk - Tq
//   lse   = m + log sum_j exp(s_j - m),  m = max_j s_j       (lse[b,h,i], the softmax statistic)
//   o[b,i,h] = sum_j p_j v[b,j,g],       p_j = exp(s_j - m) / sum_j' exp(s_j' - m)
//
// A gated-off row is skipped entirely, never reading q, k or v: o = 0 and lse = 0 (0 rather than
// -inf so lse stays finite for anything that reduces or compares it; the backward skips the row
// and never reads it). Its output does not depend on q, k, v, so its dq is 0 and it adds nothing
// to dk, dv. Backward for firing rows (flash-attention 2, recomputing p from the saved lse):
//
//   Delta = <dO[b,i,h], o[b,i,h]>,   p_j = exp(s_j - lse)
//   dv[b,j,g] += p_j dO[b,i,h]
//   dS_j = p_j (<dO[b,i,h], v[b,j,g]> - Delta)
//   dq[b,i,h]  = scale * sum_j dS_j k[b,j,g],     dk[b,j,g] += scale * dS_j q[b,i,h]
//
// Every row is computed on its own and in one fixed order, so a firing row is bitwise the same
// with or without a gate and for any Tq. Plain loops; T is float or double; gate may be null.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace amor::ref {

struct AttentionDims {
  int64_t B, Tq, Tk, H, Hkv, D;
};

template <class T>
void attention_forward(const T* q, const T* k, const T* v, const uint8_t* gate, T scale, T* o,
                       T* lse, const AttentionDims& n) {
  const int64_t group = n.H / n.Hkv, offset = n.Tk - n.Tq;
  std::vector<T> s(static_cast<size_t>(n.Tk));
  for (int64_t b = 0; b < n.B; ++b) {
    for (int64_t i = 0; i < n.Tq; ++i) {
      const bool fires = !gate || gate[b * n.Tq + i] != 0;
      for (int64_t h = 0; h < n.H; ++h) {
        T* orow = o + ((b * n.Tq + i) * n.H + h) * n.D;
        T& l = lse[(b * n.H + h) * n.Tq + i];
        if (!fires) {
          std::fill(orow, orow + n.D, T(0));
          l = T(0);
          continue;
        }
        const int64_t g = h / group, last = i + offset;
        const T* qrow = q + ((b * n.Tq + i) * n.H + h) * n.D;
        T m = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          const T* krow = k + ((b * n.Tk + j) * n.Hkv + g) * n.D;
          T dot = 0;
          for (int64_t d = 0; d < n.D; ++d) dot += qrow[d] * krow[d];
          s[j] = scale * dot;
          m = std::max(m, s[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          s[j] = std::exp(s[j] - m);
          sum += s[j];
        }
        l = m + std::log(sum);
        std::fill(orow, orow + n.D, T(0));
        for (int64_t j = 0; j <= last; ++j) {
          const T p = s[j] / sum;
          const T* vrow = v + ((b * n.Tk + j) * n.Hkv + g) * n.D;
          for (int64_t d = 0; d < n.D; ++d) orow[d] += p * vrow[d];
        }
      }
    }
  }
}

// dq, dk, dv are fully written (zero where nothing flows).
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const uint8_t* gate, T scale,
                        const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        const AttentionDims& n) {
  const int64_t group = n.H / n.Hkv, offset = n.Tk - n.Tq;
  std::fill(dq, dq + n.B * n.Tq * n.H * n.D, T(0));
  std::fill(dk, dk + n.B * n.Tk * n.Hkv * n.D, T(0));
  std::fill(dv, dv + n.B * n.Tk * n.Hkv * n.D, T(0));
  for (int64_t b = 0; b < n.B; ++b) {
    for (int64_t i = 0; i < n.Tq; ++i) {
      if (gate && gate[b * n.Tq + i] == 0) continue;
      for (int64_t h = 0; h < n.H; ++h) {
        const int64_t g = h / group, last = i + offset;
        const int64_t row = ((b * n.Tq + i) * n.H + h) * n.D;
        const T* qrow = q + row;
        const T* dorow = dout + row;
        T* dqrow = dq + row;
        const T l = lse[(b * n.H + h) * n.Tq + i];
        T delta = 0;
        for (int64_t d = 0; d < n.D; ++d) delta += dorow[d] * o[row + d];
        for (int64_t j = 0; j <= last; ++j) {
          const int64_t kv = ((b * n.Tk + j) * n.Hkv + g) * n.D;
          T dot = 0, dp = 0;
          for (int64_t d = 0; d < n.D; ++d) {
            dot += qrow[d] * k[kv + d];
            dp += dorow[d] * v[kv + d];
          }
          const T p = std::exp(scale * dot - l);
          const T ds = p * (dp - delta);
          for (int64_t d = 0; d < n.D; ++d) {
            dv[kv + d] += p * dorow[d];
            dqrow[d] += scale * ds * k[kv + d];
            dk[kv + d] += scale * ds * qrow[d];
          }
        }
      }
    }
  }
}

}  // namespace amor::ref
