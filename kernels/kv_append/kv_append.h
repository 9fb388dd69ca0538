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

}  // namespace amor
