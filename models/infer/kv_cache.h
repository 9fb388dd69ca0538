// The key/value cache of one attention (a layer's, an Oryx layer's, an AMOR block's) for B
// sequences; sequence b holds length(b) tokens. The sequences of one prefill stand at the same
// position; a joined cache (append_rows: sequences prefilled apart, then decoded together; see
// models/infer/greedy_generate.h) keeps each sequence at its own.
//
//   next_positions(T): where the next T tokens of each sequence go (RoPE's positions);
//   append(k, v):    k, v [B,T,Hkv,D] (k already rotated at next_positions(T)) join the cache,
//                    each sequence's after its own tokens;
//   attend(q, gate): q [B,Tq,H,D]: row b's queries are the last Tq positions of sequence b
//                    (causal, GQA, optional u8 [B,Tq] query gate: gated-off rows cost nothing and
//                    give 0) -> [B,Tq,H,D]. With `only` (sorted sequence indices, which the
//                    caller knows: AMOR's firing rows are on the host) only those sequences run;
//                    every other one's rows are 0, as an all-zero gate gives, without a launch.
//
// Storage is [B, capacity, Hkv, D], grown by doubling (copying the cached rows), so appending a
// token is amortised O(1); reserve_tokens(n) sizes it for n tokens per sequence at once (a
// generation knows its prompt and token limit: doubling past them would hold up to twice the
// memory, and more while it copies, which decides the longest context that fits). Each
// sequence's rows are contiguous, so attend() runs the attention op once per sequence on views of
// its own rows: no copy of the cache per step (the op's k, v are [1, length(b), Hkv, D] views),
// and sequences of different lengths cost nothing extra.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::model {

// The positions of the next T tokens of B sequences: `offset + t` for every sequence when
// per_sequence is undefined, else per_sequence i64 [B,T] on the cpu.
struct NextPositions {
  int64_t offset = 0;
  Tensor per_sequence;
};

// RoPE of x [B,T,H,D] at those positions.
Tensor rope_forward_at(const Tensor& x, const NextPositions& at, double base);

class KvCache {
 public:
  int64_t sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t b) const;
  // Whether every sequence holds the same number of tokens (an empty cache does).
  bool uniform() const;
  NextPositions next_positions(int64_t T) const;
  void append(const Tensor& k, const Tensor& v);
  // Room for `tokens` tokens per sequence without regrowing (before the first append: taken at it).
  void reserve_tokens(int64_t tokens);
  int64_t capacity() const { return capacity_; }
  Tensor attend(const Tensor& q, const Tensor& gate, const std::vector<int64_t>* only = nullptr) const;
  // other's sequences join this cache after its own, each with its own length; other is left
  // empty. Both must hold keys of one layout (or one of them none yet).
  void append_rows(KvCache& other);
  // Sequence b's cached keys or values as a [1, length(b), Hkv, D] view.
  Tensor keys(int64_t b) const { return row(k_, b); }
  Tensor values(int64_t b) const { return row(v_, b); }

 private:
  Tensor row(const Tensor& t, int64_t b) const;
  void reserve(int64_t capacity);
  // Sequence fb's cached rows of `from` into row b of new storage k, v of `capacity` rows each.
  static void copy_sequence(const KvCache& from, int64_t fb, Tensor& k, Tensor& v, int64_t b, int64_t capacity);
  int64_t longest() const;

  std::vector<int64_t> lengths_;  // per sequence; empty until the first append
  int64_t capacity_ = 0, heads_ = 0, dim_ = 0;
  int64_t planned_ = 0;  // reserve_tokens() before the layout was known
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  Tensor k_, v_;  // [B, capacity, Hkv, D]
};

}  // namespace amor::model
