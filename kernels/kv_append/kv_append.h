// One decode token appended to a KV cache's storage at each sequence's own length, with the
// lengths kept on the device (models/infer/kv_cache.h): the copies' offsets are not launch
// arguments, so a captured CUDA graph replays the step while the cache fills.
//
//   k_cache, v_cache [B, C, Hkv, D] (C rows of storage per sequence), k, v [B, 1, Hkv, D] of the
//   same dtype, lengths i32 [B]; all on one device. For every sequence b with L = lengths[b] < C:
//   row L of sequence b's storage gets k[b], v[b] and lengths[b] becomes L + 1.
//
// A sequence already holding C rows cannot take the token. The cpu checks this (an amor::Error
// naming the sequence, nothing written); cuda cannot report from inside a graph, so it leaves such
// a sequence (its rows and its length) as it was: the caller keeps a host mirror of the lengths
// and makes room before appending (KvCache). Dtypes: any on the cpu, f32 or bf16 on cuda.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

void kv_append_step(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k, const Tensor& v,
                    const Tensor& lengths);

// A decode step's RoPE and append fused: what rope_forward_lengths(q), rope_forward_lengths(k)
// (kernels/rope/rope.h) and kv_append_step(k_cache, v_cache, k_rot, v, lengths) do, in one launch
// on cuda, reading Q, K and V from one projection's output.
//
//   qkv [B, 1, (q_heads + 2 Hkv) D]: per sequence Q's q_heads heads, then K's Hkv heads, then V's
//   Hkv heads, each D wide (Hkv = k_cache.size(2), D = k_cache.size(3), even; q_heads >= 1), of
//   k_cache's dtype and device; k_cache, v_cache and lengths as kv_append_step's; base as RoPE's.
//
// Returns Q rotated at position lengths[b], [B, 1, q_heads, D]; writes K rotated at lengths[b] and
// V to row lengths[b] of sequence b's storage; lengths[b] += 1. Bit for bit the three ops'
// results on the same device. The cpu checks every sequence before writing anything (a full one,
// or a negative length, is an amor::Error naming it, and no row or length changes); it composes
// the three ops' references, so it is their bits by construction (a floating dtype other than f32
// and f64, which rope's cpu reference does not take, is rotated as f32 and rounded back: bitwise
// rope_forward_lengths(x.to(f32)).to(dtype)). On cuda (f32 or bf16) a sequence without room keeps
// its rows and its length, as kv_append_step's kernel leaves it; its Q is still rotated (at
// lengths[b]), as rope_forward_lengths would.
Tensor kv_rope_append_step(const Tensor& qkv, int64_t q_heads, const Tensor& k_cache,
                           const Tensor& v_cache, const Tensor& lengths, double base = 10000.0);

}  // namespace amor
