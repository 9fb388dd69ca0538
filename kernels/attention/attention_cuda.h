// CUDA launchers of causal GQA attention with an optional per-query gate (raw device pointers;
// argument checks in attention.cpp, math in attention_ref.h, the kernels' design at the top of
// attention_cuda.cu). q, k, v, o, dout, dq, dk, dv have dtype t (f32 or bf16); lse and the
// backward's delta scratch are f32; gate is u8 [B,Tq] on the device or null (every row fires).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

struct AttnDims {
  int64_t B, Tq, Tk, H, Hkv, D;
};

// int32 scratch both passes need: the compacted firing rows of each sequence and their counts
// (and the backward's compacted positions).
int64_t attention_row_scratch_ints(const AttnDims& n);
// f32 scratch of the backward (its `delta` argument): rowsum(dout * o) per row, and with a gate
// (gated) the compacted statistics of the firing rows, and under AMOR_ATTENTION_GATED=fused or
// fused64 the fused backward's f32 dQ accumulator (B*H*(Tq + ~32)*D floats).
int64_t attention_delta_scratch_floats(const AttnDims& n, bool gated);

// f32 scratch of the forward (its `fwd_scratch` argument): the split-KV decode path's partial
// outputs where that path may run for this dtype and shape (bf16, head dim 64 or 128, Tq <= 4,
// AMOR_ATTENTION_DECODE; alignment is checked at the call), else 0 (pass null).
int64_t attention_forward_scratch_floats(DType t, const AttnDims& n);

// o [B,Tq,H,D], lse [B,H,Tq] (natural log; 0 at gated-off rows, whose o is 0). fwd_scratch holds
// attention_forward_scratch_floats floats (null: the split decode path is not taken).
void attention_forward(DType t, const void* q, const void* k, const void* v, const uint8_t* gate,
                       float scale, void* o, float* lse, int32_t* row_scratch,
                       float* fwd_scratch, const AttnDims& n, cudaStream_t s = 0);

// attention_forward over a KV cache's storage (attention.h, attention_forward_cache): k, v
// [B, n.Tk, Hkv, D] with n.Tk the capacity, lengths i32 [B] on the device (sequence b's keys are
// its first lengths[b] rows; its queries the last Tq of them). Nothing in the launch depends on
// the lengths. scratch holds attention_cache_scratch_floats floats (null: the SIMT kernel runs).
int64_t attention_cache_scratch_floats(DType t, const AttnDims& n);
void attention_forward_cache(DType t, const void* q, const void* k, const void* v,
                             const int32_t* lengths, const uint8_t* gate, float scale, void* o,
                             float* lse, float* scratch, const AttnDims& n, cudaStream_t s = 0);

// dq [B,Tq,H,D] (0 at gated-off rows), dk and dv [B,Tk,Hkv,D] (summed over each kv head's query
// heads). delta is f32 scratch of attention_delta_scratch_floats floats. Deterministic (no
// atomics) except the opt-in gated layouts AMOR_ATTENTION_GATED=fused and fused64 (dq by f32
// atomics; attention_cuda.cu).
void attention_backward(DType t, const void* q, const void* k, const void* v, const uint8_t* gate,
                        const void* o, const float* lse, const void* dout, float scale, void* dq,
                        void* dk, void* dv, int32_t* row_scratch, float* delta,
                        const AttnDims& n, cudaStream_t s = 0);

// Whether the bf16 tensor-core kernels take this shape (else the SIMT kernels run): bf16, head
// dim 64 or 128, 16-byte aligned base pointers.
bool attention_uses_tensor_cores(DType t, int64_t D, const void* const* ptrs, int nptrs);

}  // namespace amor::cuda
