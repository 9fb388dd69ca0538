// CUDA launchers of the gated delta rule (raw device pointers; argument checks in gated_delta.cpp).
// The algorithm is the chunked WY/UT form of gated_delta_chunked_ref.h; the kernels' own comments
// (gated_delta_fwd_cuda.cu, gated_delta_bwd_cuda.cu, gated_delta_step_cuda.cu) give the math and
// the tiling.
//
// Dtypes: q, k, v, do, o, dq, dk, dv have dtype t (f32 or bf16). g and beta (and g_t, beta_t) are
// f32 or t (gate_f32 says which, one dtype for both); initial_state and d_final_state are each
// f32 or t (s0_f32 / state_f32, dsf_f32).
// final_state, d_initial_state, the decode state, dg and dbeta are f32: the states carry sums over
// the whole sequence, the gate gradients are reductions over K and V (design §2: statistics and
// reductions in f32). Every accumulation, exp and cumulative sum is f32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// Chunk lengths and per-kernel shared memory the kernels handle (checked in gated_delta.cpp).
inline constexpr int64_t kGdnMaxChunk = 64;
inline constexpr int64_t kGdnMaxSmemBytes = 227 * 1024;  // sm_90's opt-in limit per block

struct GdnShape {
  int64_t B, T, H, K, V, L;  // L: chunk length (1..kGdnMaxChunk)
};

// The largest dynamic shared memory (bytes) any kernel of the forward/backward needs for inputs of
// dtype t (f32 or bf16: the kernels keep input tiles in that dtype).
int64_t gated_delta_max_smem_bytes(DType t, const GdnShape& s);
// f32 scratch (elements) of the forward and the backward. A forward may keep what the backward
// reads (gam, W, Tm, every chunk's start state S and Vn: 2(K + L + V) + 4 bytes per token and
// head plus 2KV per chunk and head for bf16) in a `saved` buffer of gated_delta_saved_floats
// elements; the backward then skips its step 0 (recomputing the forward's prepare and state
// passes) and needs only gated_delta_backward_scratch_floats(s, true) of scratch. The results are
// the same bits either way (the same kernels compute the same values).
int64_t gated_delta_saved_floats(const GdnShape& s);
int64_t gated_delta_forward_scratch_floats(const GdnShape& s, bool saved = false);
int64_t gated_delta_backward_scratch_floats(const GdnShape& s, bool saved = false);
// q,k [B,T,H,K], v [B,T,H,V], g,beta [B,T,H], s0 [B,H,K,V] (may be null) -> o [B,T,H,V],
// s_final [B,H,K,V] f32; and, when saved is non-null, the backward's intermediates into it.
void gated_delta_forward(DType t, const void* q, const void* k, const void* v, const void* g,
                         const void* beta, bool gate_f32, const void* s0, bool state_f32,
                         float scale, void* o, float* s_final, float* scratch, const GdnShape& s,
                         cudaStream_t stream = 0, float* saved = nullptr);
// -> dq, dk [B,T,H,K], dv [B,T,H,V] (dtype t), dg, dbeta [B,T,H] f32, ds0 [B,H,K,V] f32 (when
// non-null). s0 and dsf may be null (zero). saved: null, or what the forward with the same inputs
// kept.
void gated_delta_backward(DType t, const void* q, const void* k, const void* v, const void* g,
                          const void* beta, bool gate_f32, const void* s0, bool s0_f32,
                          const void* dsf, bool dsf_f32, float scale, const void* d_o, void* dq,
                          void* dk, void* dv, float* dg, float* dbeta, float* ds0, float* scratch,
                          const GdnShape& s, cudaStream_t stream = 0,
                          const float* saved = nullptr);
// One decode step: q_t,k_t [B,H,K], v_t [B,H,V] (dtype t), g_t, beta_t [B,H] (f32 or t), state
// [B,H,K,V] f32 updated in place -> o_t [B,H,V] (dtype t).
void gated_delta_step(DType t, const void* q_t, const void* k_t, const void* v_t, const void* g_t,
                      const void* beta_t, bool gate_f32, float scale, float* state, void* o_t,
                      int64_t B, int64_t H, int64_t K, int64_t V, cudaStream_t stream = 0);

}  // namespace amor::cuda
