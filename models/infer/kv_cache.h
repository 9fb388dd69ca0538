// The key/value cache of one attention (a layer's, an Oryx layer's, an AMOR block's) for B
// sequences; sequence b holds length(b) tokens. The sequences of one prefill stand at the same
// position; a joined cache (append_rows: sequences prefilled apart, then decoded together; see
// models/infer/greedy_generate.h) keeps each sequence at its own.
//
//   rotate_next(x):  RoPE of x [B,T,H,D] at the positions of the next T tokens of each sequence
//                    (call it for the new keys and queries before append);
//   next_positions(T): those positions on the host (what the host path rotates at);
//   append(k, v):    k, v [B,T,Hkv,D] (k already rotated) join the cache, each sequence's after
//                    its own tokens;
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
// sequence's rows are contiguous.
//
// Two paths, the same values:
//
//   host path (prefill, T > 1; every call on the cpu): the lengths live on the host. RoPE at
//     next_positions, append copies at host-known offsets, and attend runs the attention op once
//     per sequence on views of its own rows (no copy of the cache; sequences of different lengths
//     cost nothing extra). The cpu is the reference and always takes this path.
//
//   step path (one token per sequence, T = 1, on the GPU unless AMOR_KV_STEP_PATH=0; the default
//     since its GPU tests passed on the H200, session 14): the lengths live on the device too,
//     an i32 [B] tensor (device_lengths) that the kernels read, so that no launch argument changes
//     from step to step and a CUDA graph captured once replays the step (decode_graph.h). RoPE at
//     the device lengths (rope_forward_lengths), append by kv_append_step (row lengths[b] of each
//     sequence's storage gets its token, lengths[b] += 1 on the device, and the host mirror
//     advances by host code), attend (Tq = 1, without `only`) by attention_forward_cache: every
//     sequence in one launch over the storage, planned for the capacity, not the lengths (at
//     batch 64 this is one launch per layer and step instead of 64). The host lengths stay the
//     mirror: a step the host path takes (a prefill) marks the device copy stale, and the next
//     step-path call uploads it (outside any capture: a capture follows an eager step).
//
// Under a graph replay the host code does not run: the replay's owner calls replayed(1) after
// it, which advances the host mirror only (LanguageModel::replayed_step does, for every cache of
// a state). A replay is valid while the storage and device lengths sit at the captured addresses
// (graph_signature) and every sequence has room for the token (has_room): the step that would
// outgrow the storage runs eagerly (append grows it) and the next one captures anew. Generations
// reserve their full length up front (reserve_tokens), so that happens rarely, if ever.
#pragma once
#include <cstdint>
#include <string>
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

// Why a model of this kind with attention has no capturable decode step while the step path is
// switched off on the GPU (AMOR_KV_STEP_PATH=0; KvCache::step_path_on_gpu).
std::string kv_step_path_off_blocker(const std::string& kind);

class KvCache {
 public:
  int64_t sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t b) const;
  // Whether every sequence holds the same number of tokens (an empty cache does).
  bool uniform() const;
  NextPositions next_positions(int64_t T) const;
  // RoPE of x [B,T,H,D] at the next T positions of each sequence: rope_forward_lengths at the
  // device lengths on the step path, rope_forward_at(next_positions(T)) otherwise (the same bits
  // at the same positions). Before append().
  Tensor rotate_next(const Tensor& x, double base) const;
  void append(const Tensor& k, const Tensor& v);
  // The step path's rotate_next(q), rotate_next(k) and append(k, v) in one launch
  // (kv_rope_append_step): qkv [B,1,(q_heads + 2 Hkv) D] is one projection's output per sequence
  // (Q's q_heads heads, then K's Hkv, then V's). K rotated and V join the cache; returns Q rotated
  // at the same position, [B,1,q_heads,D]. The same bits as the three calls. Only where
  // step_path(1) holds (the caller checks).
  Tensor append_qkv_step(const Tensor& qkv, int64_t q_heads, double base);
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

  // ---- The step path (above) and CUDA graphs of decode steps.
  // Whether a call for T tokens per sequence takes the step path: T == 1, a cache that holds
  // tokens already (the first append fixes the layout), on the GPU while step_path_on_gpu(), or on
  // the cpu while use_step_path_on_cpu is on.
  bool step_path(int64_t T) const;
  // The lengths as i32 [B] on the cache's device (uploaded from the host mirror first if a host
  // path call changed them). Its address stays while the number of sequences does.
  const Tensor& device_lengths() const;
  // The storage [B, capacity, Hkv, D].
  const Tensor& key_storage() const { return k_; }
  const Tensor& value_storage() const { return v_; }
  // After a graph replay of T (= 1) steps: the replay's kernels advanced the device lengths and
  // wrote the tokens; the host mirror advances (every sequence by T) to match.
  void replayed(int64_t T);
  // Whether every sequence can take T more tokens without the storage regrowing (false while the
  // cache holds no token: its first append allocates).
  bool has_room(int64_t T) const;
  // What a captured step reads at fixed addresses: the storage, the device lengths, the
  // capacity and the number of sequences, appended to `out`. A replay is valid while it is
  // unchanged.
  void graph_signature(std::vector<uintptr_t>& out) const;
  // On the GPU the step path is taken unless it is switched off: AMOR_KV_STEP_PATH=0 (read once
  // per process through env_choice; unset, empty or 1: on, anything else an error naming the
  // variable), or use_step_path_on_gpu(false). On by default since its kernels and graphs passed
  // their GPU tests on the H200 (tests/cuda/RESULTS.md, session 14); while off, GPU decode steps
  // take the host path and models with attention cannot be captured (their blockers say so).
  // Process-wide.
  static bool step_path_on_gpu();
  static void use_step_path_on_gpu(bool on);
  // AMOR_KV_STEP_PATH read now, through env_choice (kernels/core/env_switch.h: unset, "" or 1 on,
  // 0 off, anything else an error naming the variable, its value and what it accepts); for tests.
  static bool read_step_path_switch();
  // For tests: the cpu takes the step path too (its ops' cpu references: kv_append_step,
  // rope_forward_lengths, attention_forward_cache), so the step path's bookkeeping is checked on
  // the cpu, where it must give the host path's bits. Process-wide; off by default.
  static void use_step_path_on_cpu(bool on);

 private:
  Tensor row(const Tensor& t, int64_t b) const;
  void reserve(int64_t capacity);
  // Sequence fb's cached rows of `from` into row b of new storage k, v of `capacity` rows each.
  static void copy_sequence(const KvCache& from, int64_t fb, Tensor& k, Tensor& v, int64_t b, int64_t capacity);
  int64_t longest() const;
  // Room for T more tokens in every sequence, growing by doubling if needed.
  void make_room(int64_t T);

  std::vector<int64_t> lengths_;  // per sequence; empty until the first append
  int64_t capacity_ = 0, heads_ = 0, dim_ = 0;
  int64_t planned_ = 0;  // reserve_tokens() before the layout was known
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  Tensor k_, v_;  // [B, capacity, Hkv, D]
  // The step path's i32 [B] lengths on device_, and whether they equal lengths_ (a host path
  // call changes lengths_ alone; device_lengths() uploads them then).
  mutable Tensor device_lengths_;
  mutable bool device_lengths_current_ = false;
};

}  // namespace amor::model
