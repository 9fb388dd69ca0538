// Memory layout shared by the gated delta rule references (recurrent, chunked, decode step).
//
// Per-head sequences live inside [B,T,H,D] tensors (q, k: D = K; v, o: D = V; g, beta: D = 1),
// so one head's time step t starts at ((b*T + t)*H + h)*D and consecutive steps are H*D apart.
// States are [B,H,K,V]: head (b,h) owns the contiguous K*V block at (b*H + h)*K*V, row i = key dim.
#pragma once
#include <cstdint>

namespace amor::ref {

struct GatedDeltaDims {
  int64_t B, T, H, K, V;
};

// One head's sequence inside a [B,T,H,D] tensor: seq[t] points at its D values of step t.
template <class T>
struct HeadSeq {
  T* base;
  int64_t stride;
  T* operator[](int64_t t) const { return base + t * stride; }
};

template <class T>
HeadSeq<T> head_seq(T* p, const GatedDeltaDims& d, int64_t b, int64_t h, int64_t D) {
  return {p + (b * d.T * d.H + h) * D, d.H * D};
}

inline int64_t state_offset(const GatedDeltaDims& d, int64_t b, int64_t h) {
  return (b * d.H + h) * d.K * d.V;
}

}  // namespace amor::ref
