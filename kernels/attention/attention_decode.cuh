// The split-KV ("flash-decoding") forward of causal GQA attention for a few query rows over a
// long KV cache (attention_decode_cuda.cu, where the design is): declarations for the dispatch in
// attention_cuda.cu. Host side only; included by .cu files.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention_cuda.h"
#include "kernels/cast/cuda_device.cuh"

namespace amor::cuda::attn {

// The most query rows per sequence (Tq) the split kernel takes.
constexpr int kDecodeMaxTq = 4;

// How a split forward is laid out: `rows` query rows per block (1, 2, 4 or 8: query heads of one
// kv head times query positions), `chunks` blocks of rows per kv head, `splits` ranges of
// `split_len` keys each (the last one shorter). rows == 0: the shape is not one the kernel takes.
struct DecodePlan {
  int rows = 0, chunks = 0, splits = 0;
  int64_t split_len = 0;
};
// bf16 and 16-byte alignment are the caller's checks; this one needs D 64 or 128, 1 <= Tq <= 4
// and the grid limits. AMOR_ATTENTION_DECODE_SPLITS (0 or unset: chosen from the SM count) forces
// the number of key ranges (at most one per 64 keys).
DecodePlan decode_plan(const AttnDims& n);
// f32 scratch of the split forward: the per-split partial outputs and their (max, sum).
int64_t decode_scratch_floats(const AttnDims& n);

// o [B,Tq,H,D] bf16, lse [B,H,Tq] f32 (natural log; 0 and o = 0 at gated-off rows) from q
// [B,Tq,H,D], k, v [B,Tk,Hkv,D] bf16 (16-byte aligned), gate u8 [B,Tq] or null; scratch holds
// decode_scratch_floats(n) floats. lengths: null (every sequence has Tk keys), or i32 [B] on the
// device over a KV cache's storage: sequence b's keys are its first lengths[b] <= Tk rows (the
// plan stays Tk's: see attention_decode_cuda.cu).
void forward_decode(const bf16_t* q, const bf16_t* k, const bf16_t* v, const uint8_t* gate,
                    const int32_t* lengths, float scale, bf16_t* o, float* lse, float* scratch,
                    const AttnDims& n, cudaStream_t s);

}  // namespace amor::cuda::attn
