// CUDA launchers of the Mamba2 SSD scan (raw device pointers; argument checks in ssd.cpp; the
// math in ssd_chunked_ref.h, the kernels' plan in ssd_forward_cuda.cu).
//
// Dtypes on the GPU: x, B, C, dy, y, dx, dB, dC have one storage dtype `t` (f32 or bf16); dt, A,
// D, the states (initial, final, decode) and their gradients, ddt, dA and dD are f32 (dt and A
// feed exp(cumsum(dt A)), which bf16 would visibly distort over a chunk; states are sums over
// many steps). Null initial_state: zeros; null final_state / d_final_state / dinitial_state: not
// wanted / not used. All arithmetic is f32; every reduction has a fixed order (no atomics).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

struct SsdDims {
  int64_t batch, seqlen, heads, headdim, groups, dstate;
  int64_t chunk;  // the chunk_size argument (>= 1); the kernels use min(chunk, max(seqlen, 1))
};

// The largest chunk the kernels take (a chunk's tiles live in shared memory).
inline constexpr int64_t kSsdMaxChunk = 128;
// Shared memory a block may use on sm_90 (227 KiB, the opt-in limit).
inline constexpr int64_t kSsdMaxSmemBytes = 227 * 1024;
// The most shared memory any SSD kernel needs for these sizes (the caller checks the limit).
int64_t ssd_smem_bytes(const SsdDims& d);

// Floats of f32 scratch the forward / backward need on inputs of storage dtype t (chunk log
// decays, chunk or span states, ...); saved: with a `saved` buffer (below), which holds part of
// what the scratch would.
//
// A forward may keep what the backward would recompute in `saved`, ssd_saved_floats(t, d) floats
// (f32 elements; the bf16 part packed inside): the backward given it skips its rerun of the
// forward and gives the same bits (the same kernels computed the same values, or, on the span
// path, the forward's chunk scan carries the very state span_states would rebuild). What it holds:
//   bf16 by spans (the default bf16 path): cum [B,H,T] f32 and the state entering every chunk,
//     S_c [B,H,nc,P,N] bf16: 4 + 2 P N / Q bytes per token and head (260 B at P 64, N 128, Q 64;
//     nc = ceil(T / Q)); the backward skips cumsum, span_states (x, B), span_passing and
//     span_states (x, B) -> S_c;
//   f32, and bf16 per chunk: the forward's whole scratch, cum [B,H,T] and S_c [B,H,nc,P,N] f32:
//     4 + 4 P N / Q bytes per token and head (516 B at the presets); the backward skips cumsum,
//     chunk_outer (x, B) and state_passing.
// The layout depends on the path, so on ssd_set_spans (not on the span length): a forward and
// the backward given its saved run with the same setting.
int64_t ssd_saved_floats(DType t, const SsdDims& d);
int64_t ssd_forward_scratch_floats(DType t, const SsdDims& d, bool saved = false);
int64_t ssd_backward_scratch_floats(DType t, const SsdDims& d, bool saved = false);

// x [B,T,H,P], dt [B,T,H] f32, A [H] f32, Bm/Cm [B,T,G,N], D [H] f32, h0 [B,H,P,N] f32 or null
// -> y [B,T,H,P], hT [B,H,P,N] f32 (null: not wanted); and, when saved is not null, the
// backward's intermediates into it.
void ssd_forward(DType t, const SsdDims& d, const void* x, const float* dt, const float* A,
                 const void* Bm, const void* Cm, const float* D, const float* h0, void* y,
                 float* hT, float* scratch, cudaStream_t s = 0, float* saved = nullptr);

// dy [B,T,H,P], dhT [B,H,P,N] f32 or null -> dx [B,T,H,P], ddt [B,T,H] f32, dA [H] f32,
// dB/dC [B,T,G,N], dD [H] f32, dh0 [B,H,P,N] f32 (null: not wanted). saved: null, or what the
// forward with the same inputs kept.
void ssd_backward(DType t, const SsdDims& d, const void* x, const float* dt, const float* A,
                  const void* Bm, const void* Cm, const float* D, const float* h0, const void* dy,
                  const float* dhT, void* dx, float* ddt, float* dA, void* dB, void* dC,
                  float* dD, float* dh0, float* scratch, cudaStream_t s = 0,
                  const float* saved = nullptr);

// Per-kernel timing (bench-ssd --kernels): while a hook is set, ssd_forward and ssd_backward call
// it with "start" before their first kernel and then after each kernel they launch, with the
// kernel's name and the stream (so events recorded by the hook time each kernel). Off (null) by
// default; not thread-safe (a benchmark's switch).
using SsdKernelHook = void (*)(const char* kernel, cudaStream_t s);
void ssd_set_kernel_hook(SsdKernelHook hook);

// The bf16 path by spans of chunks (ssd_state_tc_cuda.cu) is on by default; off, bf16 runs the
// per-chunk tensor-core kernels (the earlier path, kept for comparison: bench-ssd times both).
void ssd_set_spans(bool on);
// Chunks per span of that path: m >= 1 fixes it (capped at 64), 0 (the default) lets the
// launchers choose (16 where that leaves >= 1024 blocks, else fewer). Also settable as
// AMOR_SSD_SPAN_LEN=m in the environment (0 to 64; read once, at the first span launch unless
// ssd_set_span_len came first). Not thread-safe (a benchmark's switch:
// bench-ssd --kernels sweeps it).
void ssd_set_span_len(int m);
// Stages of copies in flight in the span-state kernels (ssd_state_tc_cuda.cu): 2..4 fixes it
// (where the shared memory allows), 0 (the default) lets the launcher choose (4 at the 1.5B
// presets). A benchmark's switch, as above.
void ssd_set_span_stages(int stages);

// One decode step: x [B,H,P], dt [B,H] f32, A [H] f32, Bm/Cm [B,G,N], D [H] f32; state
// [B,H,P,N] f32 updated in place -> y [B,H,P].
void ssd_step(DType t, int64_t batch, int64_t heads, int64_t headdim, int64_t groups,
              int64_t dstate, const void* x, const float* dt, const float* A, const void* Bm,
              const void* Cm, const float* D, float* state, void* y, cudaStream_t s = 0);

}  // namespace amor::cuda
