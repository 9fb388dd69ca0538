// Device pieces shared by the SSD kernels (ssd_forward_cuda.cu, ssd_backward_cuda.cu): where a
// block's chunk lies, loading a chunk's rows into shared memory, and a block-wide small matrix
// product on shared-memory tiles. Plus the f32 scratch layout and the pieces of the forward that
// the backward reruns (launchers defined in ssd_forward_cuda.cu).
//
// Shared-memory matrices are f32 with a row stride of (width + 1) floats: a warp reading a column
// (or a transposed row) then hits 32 different banks.
#pragma once
#include "kernels/cast/cuda_device.cuh"
#include "kernels/ssd/ssd_cuda.h"

namespace amor::cuda::ssd {

constexpr int kThreads = 256;  // threads of every per-chunk block

// The sizes as the kernels use them (chunk clamped to the sequence, chunk count).
struct Dims {
  int64_t B, T, H, P, G, N, Q, nc;
};

inline Dims dims_of(const SsdDims& d) {
  Dims k{d.batch, d.seqlen, d.heads, d.headdim, d.groups, d.dstate, 0, 0};
  k.Q = d.chunk < (d.seqlen > 1 ? d.seqlen : 1) ? d.chunk : (d.seqlen > 1 ? d.seqlen : 1);
  k.nc = (d.seqlen + k.Q - 1) / k.Q;
  return k;
}

// Compile-time shapes. A kernel instantiated with Shape<Q, P, N, full> (sizes > 0) overwrites its
// Dims with them on entry, so the compiler folds every size, stride, offset and trip count that
// derives from them and unrolls the loops over them; Shape<0, 0, 0, false> keeps the runtime
// values (any shape). full: every chunk has Q steps (T % Q == 0), so a chunk's length is a
// constant too. Why: ncu on the H200 (RESULTS.md, 2026-12-01 session 2) found the runtime-shape
// tensor-core kernels issue-bound, with 25-60 instructions issued per MMA, most of them integer
// address and loop arithmetic.
template <int kQ, int kP, int kN, bool kFull>
struct Shape {
  static constexpr bool full = kFull;
  __device__ __forceinline__ static void fix(Dims& k) {
    if constexpr (kQ > 0) k.Q = kQ;
    if constexpr (kP > 0) k.P = kP;
    if constexpr (kN > 0) k.N = kN;
  }
  // Steps of the chunk starting at t0.
  __device__ __forceinline__ static int len(const Dims& k, int64_t t0) {
    if constexpr (kFull) return int(k.Q);
    return int(k.T - t0 < k.Q ? k.T - t0 : k.Q);
  }
};
using AnyShape = Shape<0, 0, 0, false>;

// Calls launch(Shape<...>{}) with the compile-time shape of the 1.5B presets (Q 64, P 64, N 128;
// full chunks or not) where k has it, else with AnyShape. kUseFull false: never the full-chunk
// variant (for a kernel where the constant length costs more registers than it saves: ptxas -v).
template <bool kUseFull = true, class F>
void with_shape(const Dims& k, F&& launch) {
  if (k.Q == 64 && k.P == 64 && k.N == 128) {
    if constexpr (kUseFull) {
      if (k.T % 64 == 0) {
        launch(Shape<64, 64, 128, true>{});
        return;
      }
    }
    launch(Shape<64, 64, 128, false>{});
    return;
  }
  launch(AnyShape{});
}

// The chunk of one block: grid (chunks, batch * heads).
struct Chunk {
  int64_t b, h, g, c, t0;
  int len;        // steps in this chunk (the last one may be short)
  int64_t bh;     // b * H + h
};

__device__ __forceinline__ Chunk chunk_of_block(const Dims& k) {
  Chunk ch;
  // 32-bit divisions (grid indices fit): a 64-bit one is a long software sequence, and these
  // blocks are short enough for it to show (ncu, 2026-12-01: ~10% of dx's instructions).
  const int bh = int(blockIdx.y), H = int(k.H), b = bh / H, h = bh - b * H;
  ch.c = blockIdx.x;
  ch.bh = bh;
  ch.b = b;
  ch.h = h;
  ch.g = h / (H / int(k.G));
  ch.t0 = ch.c * k.Q;
  const int64_t rest = k.T - ch.t0;
  ch.len = int(rest < k.Q ? rest : k.Q);
  return ch;
}

// chunk_of_block for a kernel instantiated with the shape Sh (fixes k first).
template <class Sh>
__device__ __forceinline__ Chunk chunk_of_block(Dims& k) {
  Sh::fix(k);
  Chunk ch = chunk_of_block(static_cast<const Dims&>(k));
  if constexpr (Sh::full) ch.len = int(k.Q);
  return ch;
}

// dst[i * (W + 1) + w] = src row (t0 + i) of a [B, T, X, W] tensor at (b, xi), for i < rows;
// zero for len <= i < rows.
template <class T>
__device__ __forceinline__ void load_rows(float* dst, const T* __restrict__ src, int64_t b,
                                          int64_t xi, int64_t t0, int len, int rows, int64_t Tn,
                                          int64_t X, int W) {
  for (int e = threadIdx.x; e < rows * W; e += blockDim.x) {
    const int i = e / W, w = e % W;
    dst[i * (W + 1) + w] = i < len ? to_f32(src[((b * Tn + t0 + i) * X + xi) * W + w]) : 0.0f;
  }
}

// dst[p * (N + 1) + n] = src[p * N + n]: one [P, N] f32 state.
__device__ __forceinline__ void load_state(float* dst, const float* __restrict__ src, int P,
                                           int N) {
  for (int e = threadIdx.x; e < P * N; e += blockDim.x) dst[(e / N) * (N + 1) + e % N] = src[e];
}

// A view of a shared-memory matrix: element (r, c) at p[r * rs + c * cs] (a transposed view
// swaps the strides).
struct SMat {
  const float* p;
  int rs, cs;
  __device__ __forceinline__ float at(int r, int c) const { return p[r * rs + c * cs]; }
};

// Block-wide products out[M, N] (+)= A[M, K] B[K, N] on shared-memory views: thread tiles of
// kTM x kTN elements at rows mt + i * ms and columns nt + j * ns (strided, so that a warp's
// threads read adjacent columns). for_tiles(M, N, f) calls f(tile) for each of this thread's
// tiles; a Tile accumulates products and hands its in-range elements to an epilogue.
constexpr int kTM = 4, kTN = 4;

struct Tile {
  int mt, nt, ms, ns, M, N;
  float acc[kTM][kTN];

  __device__ __forceinline__ int row(int i) const { return mt + i * ms; }
  __device__ __forceinline__ int col(int j) const { return nt + j * ns; }

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
      for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;
  }

  // acc += sum_{k < K} A(row, k) B(k, col). Rows and columns past M, N are clamped (computed,
  // never stored).
  __device__ __forceinline__ void mac(SMat A, SMat Bv, int K) {
    int r[kTM], c[kTN];
#pragma unroll
    for (int i = 0; i < kTM; ++i) r[i] = row(i) < M ? row(i) : M - 1;
#pragma unroll
    for (int j = 0; j < kTN; ++j) c[j] = col(j) < N ? col(j) : N - 1;
    for (int k = 0; k < K; ++k) {
      float a[kTM], bv[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) a[i] = A.at(r[i], k);
#pragma unroll
      for (int j = 0; j < kTN; ++j) bv[j] = Bv.at(k, c[j]);
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * bv[j];
    }
  }

  // f(row, col, value) for each in-range element.
  template <class F>
  __device__ __forceinline__ void each(F&& f) const {
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
      for (int j = 0; j < kTN; ++j)
        if (row(i) < M && col(j) < N) f(row(i), col(j), acc[i][j]);
  }
};

template <class F>
__device__ __forceinline__ void for_tiles(int M, int N, F&& f) {
  const int ms = (M + kTM - 1) / kTM, ns = (N + kTN - 1) / kTN;
  for (int t = threadIdx.x; t < ms * ns; t += blockDim.x) {
    Tile tile;
    tile.mt = t / ns;
    tile.nt = t % ns;
    tile.ms = ms;
    tile.ns = ns;
    tile.M = M;
    tile.N = N;
    tile.zero();
    f(tile);
  }
}

// ---- f32 scratch (offsets in floats). The forward's: cum [B,H,T] (within-chunk inclusive
// cumsum of dt A), states [B,H,nc,P,N] (chunk states, then the states entering each chunk).
// The backward adds grads [B,H,nc,P,N] (the gradient of each chunk's end state), dcum [B,H,T],
// dBh and dCh [B,T,H,N] (per-head dB, dC before the sum over a group's heads) and partials
// [B*nc, 2H] (per-chunk dA then dD).
struct Scratch {
  float *cum, *states, *grads, *dcum, *dBh, *dCh, *partials;
};

inline int64_t state_floats(const Dims& k) { return k.B * k.H * k.nc * k.P * k.N; }

inline Scratch carve(const Dims& k, float* base, bool backward) {
  Scratch s{};
  s.cum = base;
  s.states = s.cum + k.B * k.H * k.T;
  if (!backward) return s;
  s.grads = s.states + state_floats(k);
  s.dcum = s.grads + state_floats(k);
  s.dBh = s.dcum + k.B * k.H * k.T;
  s.dCh = s.dBh + k.B * k.T * k.H * k.N;
  s.partials = s.dCh + k.B * k.T * k.H * k.N;
  return s;
}

inline int64_t scratch_floats(const Dims& k, bool backward) {
  int64_t n = k.B * k.H * k.T + state_floats(k);
  if (backward) n += state_floats(k) + k.B * k.H * k.T + 2 * k.B * k.T * k.H * k.N + k.B * k.nc * 2 * k.H;
  return n;
}

// With a forward's `saved` buffer (ssd_cuda.h) on the per-chunk paths: saved is the forward's
// scratch (cum, then the states entering each chunk, as carve(k, saved, false) lays them out),
// and the backward's scratch holds the rest (grads, dcum, dBh, dCh, partials) in carve's order.
inline Scratch carve_saved(const Dims& k, float* saved, float* base) {
  Scratch s{};
  s.cum = saved;
  s.states = saved + k.B * k.H * k.T;
  s.grads = base;
  s.dcum = s.grads + state_floats(k);
  s.dBh = s.dcum + k.B * k.H * k.T;
  s.dCh = s.dBh + k.B * k.T * k.H * k.N;
  s.partials = s.dCh + k.B * k.T * k.H * k.N;
  return s;
}

// The bf16 span path's backward scratch (ssd_backward_cuda.cu): cum and dcum [B,H,T], the span
// states [B,H,ns,P,N] f32 (the forward's, then reused for the gradients'), the chunk states S_c
// and gradients G_{c+1} [B,H,nc,P,N] bf16, dBh and dCh [B,T,H,N] bf16, partials [B*nc, 2H];
// every piece 16-byte aligned. With base null, only .floats (the total) is meaningful. saved:
// the forward kept cum and S_c (span_saved below), so the scratch has neither (both null here).
struct SpanScratch {
  float *cum, *dcum, *spans, *partials;
  bf16_t *states, *grads, *dBh, *dCh;
  int64_t floats;
};

int span_len(const Dims& k);  // ssd_state_tc_cuda.cu

inline SpanScratch span_scratch(const Dims& k, float* base, bool saved = false) {
  SpanScratch s{};
  int64_t at = 0;
  auto take = [&](int64_t floats) {
    float* p = base ? base + at : nullptr;
    at += (floats + 3) / 4 * 4;
    return p;
  };
  const int64_t m = span_len(k), ns = (k.nc + m - 1) / m;
  const int64_t chunk_states = k.B * k.H * k.nc * k.P * k.N, bhn = k.B * k.T * k.H * k.N;
  if (!saved) s.cum = take(k.B * k.H * k.T);
  s.dcum = take(k.B * k.H * k.T);
  s.spans = take(k.B * k.H * ns * k.P * k.N);
  s.partials = take(k.B * k.nc * 2 * k.H);
  if (!saved) s.states = reinterpret_cast<bf16_t*>(take((chunk_states + 1) / 2));
  s.grads = reinterpret_cast<bf16_t*>(take((chunk_states + 1) / 2));
  // dBh, dCh: bf16 per head, or f32 per split of heads (dbc_heads_tc_kernel: 8 heads a split).
  const int64_t splits = k.G * ((k.H / (k.G > 0 ? k.G : 1) + 7) / 8);
  const int64_t per = (bhn + 1) / 2 > k.B * k.T * splits * k.N ? (bhn + 1) / 2
                                                                 : k.B * k.T * splits * k.N;
  s.dBh = reinterpret_cast<bf16_t*>(take(per));
  s.dCh = reinterpret_cast<bf16_t*>(take(per));
  s.floats = at;
  return s;
}

// The span path's `saved` buffer (ssd_cuda.h): cum [B,H,T] f32 (the forward's), then the bf16
// chunk states S_c [B,H,nc,P,N] (the state entering each chunk, as the forward's scan_spans
// carries it), 16-byte aligned. floats: the size in f32 elements (base null: only that).
struct SpanSaved {
  float* cum;
  bf16_t* states;
  int64_t floats;
};
inline SpanSaved span_saved(const Dims& k, float* base) {
  const int64_t cum = (k.B * k.H * k.T + 3) / 4 * 4;
  const int64_t states = (k.B * k.H * k.nc * k.P * k.N + 1) / 2;
  return {base, base ? reinterpret_cast<bf16_t*>(base + cum) : nullptr, cum + (states + 3) / 4 * 4};
}

// Calls the kernel hook (ssd_cuda.h) where one is set: mark("name", s) after each launch.
void mark(const char* kernel, cudaStream_t s);

// ---- pieces of the forward the backward reruns (ssd_forward_cuda.cu).
// cum = within-chunk inclusive cumsum of dt A.
void launch_chunk_cumsum(const Dims& k, const float* dt, const float* A, float* cum,
                         cudaStream_t s);
// out[b,h,c] = sum_{i in chunk c} wt_i u_i v_i^T, u rows of a [B,T,H,P] tensor, v of [B,T,G,N];
// wt_i = exp(cum_last - cum_i) dt_i (the chunk state) when `to_end`, else exp(cum_i) (the
// gradient a chunk's outputs send to the state entering it).
void launch_chunk_outer(DType t, const Dims& k, const void* u, const void* v, const float* dt,
                        const float* cum, bool to_end, float* out, cudaStream_t s);
// In place over [B,H,nc,P,N]: chunk states -> states entering each chunk; hT = the last one.
void launch_state_passing(const Dims& k, const float* cum, const float* h0, float* states,
                          float* hT, cudaStream_t s);
// The shared memory the forward's per-chunk kernels need.
int64_t forward_smem(const Dims& k);

// Launches a per-chunk kernel (grid: chunks x batch*heads, kThreads threads) with `bytes` of
// dynamic shared memory, raising the kernel's limit above the default 48 KiB first. (The
// emulator, tests/cuda/emu, rewrites the launch here as in the .cu files: it rewrites every
// kernel header.)
template <class K, class... Args>
void launch_chunks(K kernel, const Dims& k, int64_t bytes, cudaStream_t s, Args... args) {
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(bytes)));
  kernel<<<dim3(unsigned(k.nc), unsigned(k.B * k.H)), kThreads, size_t(bytes), s>>>(args...);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace amor::cuda::ssd
