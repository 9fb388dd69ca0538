// The key/value cache of one attention (a layer's, an Oryx layer's, an AMOR block's) for B
// sequences that stand at the same position L.
//
//   append(k, v):    k, v [B,T,Hkv,D] (k already rotated at positions L..L+T-1) join the cache;
//   attend(q, gate): q [B,Tq,H,D] are the last Tq positions of the cache (causal, GQA, optional
//                    u8 [B,Tq] query gate: gated-off rows cost nothing and give 0) -> [B,Tq,H,D].
//
// Storage is [B, capacity, Hkv, D], grown by doubling (copying the L cached rows), so appending a
// token is amortised O(1). Each sequence's first L rows are contiguous, so attend() runs the
// attention op once per sequence on views of its own rows: no copy of the cache per step (the
// op's k, v are [1, L, Hkv, D] views).
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor::model {

class KvCache {
 public:
  int64_t length() const { return length_; }
  void append(const Tensor& k, const Tensor& v);
  Tensor attend(const Tensor& q, const Tensor& gate) const;
  // Sequence b's cached keys or values as a [1, L, Hkv, D] view.
  Tensor keys(int64_t b) const { return row(k_, b); }
  Tensor values(int64_t b) const { return row(v_, b); }

 private:
  Tensor row(const Tensor& t, int64_t b) const;
  void reserve(int64_t capacity);

  int64_t batch_ = 0, capacity_ = 0, length_ = 0, heads_ = 0, dim_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  Tensor k_, v_;  // [B, capacity, Hkv, D]
};

}  // namespace amor::model
