// Device-side pieces shared by the gated delta rule's CUDA kernels (included by .cu files only):
// the problem dimensions, the layout of the f32 scratch between kernels, the shared-memory layout
// of every kernel (one description used by the host to size the launch and by the device to carve
// the buffer), row loaders, and a plain block-wide matrix product.
//
// Indexing (as gated_delta_ref_common.h): inputs are [B,T,H,D]; scratch rows are per head,
// [B*H, T, D] (bh = b*H + h), so one chunk's rows are contiguous; per-chunk states are
// [B*H, NC, K, V] with NC = ceil(T / L) chunks per sequence.
#pragma once
#include "kernels/cast/cuda_device.cuh"
#include "kernels/gated_delta/gated_delta_cuda.h"

namespace amor::cuda::gdn {

constexpr int kThreads = 256;    // every chunk kernel
constexpr int kVt = 32;          // V columns per tile (output and backward kernels, state passes)
constexpr int kVtPad = kVt + 1;  // row stride of [*, kVt] tiles that are read down a column
// Row stride of the [*, kVt] tiles the state passes and the output kernel use as the B operand of
// a tensor-core product (gated_delta_tc.cuh): lane (g, t) reads rows 2t, 2t + 1 at column g, banks
// (8t + g) mod 32 with a stride of 4 mod 32, all distinct (a stride of 32 would be 4-way).
constexpr int kVs = kVt + 4;

// The storage dtype of a kernel instantiation's T (float or bf16_t).
template <class T>
inline constexpr DType storage_dtype = sizeof(T) == 4 ? DType::F32 : DType::BF16;

struct Dims {
  int64_t B, T, H, K, V, NC;
  int L;
};

inline Dims dims_of(const GdnShape& s) {
  return {s.B, s.T, s.H, s.K, s.V, (s.T + s.L - 1) / s.L, int(s.L)};
}

// A bump allocator over a block's dynamic shared memory; with a null base (on the host) it only
// counts the floats a layout needs.
struct Carve {
  float* base;
  int64_t used = 0;
  __host__ __device__ float* take(int64_t n) {
    float* r = base ? base + used : nullptr;
    used += n;
    return r;
  }
  // Reuses the region that starts at `start` (taken last, up to now), grown by n floats.
  __host__ __device__ float* extend(float* start, int64_t n) {
    take(n);
    return start;
  }
};

// The f32 scratch between the kernels, carved from one allocation (same bump order everywhere).
struct Scratch {
  // Forward: gam [BH,T], W [BH,T,K], U then Vn [BH,T,V], chunk start states [BH,NC,K,V].
  float *gam, *W, *Vn, *S;
  // Backward: Tm [BH,T,L], dS' per chunk [BH,NC,K,V], dVn [BH,T,V], dW, the dk partial [BH,T,K],
  // the dgam partial [BH,T].
  float *Tm, *dS, *dVn, *dW, *dk, *dgam;
  __host__ __device__ Scratch(Carve& c, const Dims& d, bool backward) {
    const int64_t BHT = d.B * d.H * d.T, states = d.B * d.H * d.NC * d.K * d.V;
    gam = c.take(BHT);
    W = c.take(BHT * d.K);
    Vn = c.take(BHT * d.V);
    S = c.take(states);
    Tm = dS = dVn = dW = dk = dgam = nullptr;
    if (backward) {
      Tm = c.take(BHT * d.L);
      dS = c.take(states);
      dVn = c.take(BHT * d.V);
      dW = c.take(BHT * d.K);
      dk = c.take(BHT * d.K);
      dgam = c.take(BHT);
    }
  }
};

// ---- where a chunk block works: chunk c of head (b, h), rows t0 .. t0 + n - 1
struct ChunkPos {
  int64_t b, h, bh, c, t0;
  int n;
};

__device__ __forceinline__ ChunkPos chunk_pos(const Dims& d) {
  ChunkPos p;
  p.c = blockIdx.x;
  p.h = blockIdx.y;
  p.b = blockIdx.z;
  p.bh = p.b * d.H + p.h;
  p.t0 = p.c * d.L;
  p.n = int(d.T - p.t0 < d.L ? d.T - p.t0 : d.L);
  return p;
}

// Element i of a tensor stored as f32 (is_f32) or bf16.
__device__ __forceinline__ float load_any(const void* p, int64_t i, bool is_f32) {
  return is_f32 ? static_cast<const float*>(p)[i] : to_f32(static_cast<const bf16_t*>(p)[i]);
}

// Copies count elements global -> shared, element idx read by ld(idx) and written by st(idx, v),
// kCopyBatch loads in flight per thread before the first store (a load-store loop would wait
// out one memory latency per element: the store needs the loaded register).
constexpr int kCopyBatch = 8;
template <class Ld, class St>
__device__ __forceinline__ void batched_copy(int count, Ld ld, St st) {
  const int stride = int(blockDim.x);
  for (int base = int(threadIdx.x); base < count; base += kCopyBatch * stride) {
    float r[kCopyBatch];
#pragma unroll
    for (int u = 0; u < kCopyBatch; ++u) {
      const int idx = base + u * stride;
      r[u] = idx < count ? ld(idx) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kCopyBatch; ++u) {
      const int idx = base + u * stride;
      if (idx < count) st(idx, r[u]);
    }
  }
}

// Columns [c0, c0 + w) of rows t0 .. t0+n-1 of head (b, h) of a [B,T,H,D] tensor -> f32 sm
// [n][ld] (columns 0..w-1 of each row).
template <class T>
__device__ void load_rows(const T* x, const Dims& d, int64_t b, int64_t h, int64_t t0, int n,
                          int64_t D, int64_t c0, int w, float* sm, int64_t ld) {
  batched_copy(
      n * w,
      [&](int idx) { return to_f32(x[((b * d.T + t0 + idx / w) * d.H + h) * D + c0 + idx % w]); },
      [&](int idx, float v) { sm[(idx / w) * ld + idx % w] = v; });
}

// The same from an f32 scratch whose rows (of width D) start at `row0`.
__device__ __forceinline__ void load_scratch(const float* x, int64_t row0, int n, int64_t D,
                                             int64_t c0, int w, float* sm, int64_t ld) {
  batched_copy(
      n * w, [&](int idx) { return x[(row0 + idx / w) * D + c0 + idx % w]; },
      [&](int idx, float v) { sm[(idx / w) * ld + idx % w] = v; });
}

// For every (m, n) of [0,M) x [0,N): f(m, n, sum_{k<Kd} a(m,k) b(k,n)), f32, SIMT, with a
// register tile per thread: TM consecutive rows times TN columns n = cs + j * Nc (Nc = N / TN
// column slots), so each k step loads TM + TN operands for TM * TN multiply-adds. Consecutive
// threads take consecutive column slots: b(k, n) of a row-major tile is read conflict-free, a(m, k)
// is a broadcast. Each output belongs to one thread, the same one for the same M and N (whatever
// Kd), so calls that accumulate into an array need no barrier between them. Indices past M or N
// are clamped for the loads (always valid addresses) and their results dropped.
template <int TM = 4, int TN = 4, class A, class Bm, class F>
__device__ __forceinline__ void block_mm(int M, int N, int Kd, A a, Bm b, F f) {
  const int Mr = (M + TM - 1) / TM, Nc = (N + TN - 1) / TN;
  for (int idx = threadIdx.x; idx < Mr * Nc; idx += blockDim.x) {
    const int m0 = (idx / Nc) * TM, cs = idx % Nc;
    int ms[TM], ns[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) ms[i] = m0 + i < M ? m0 + i : M - 1;
#pragma unroll
    for (int j = 0; j < TN; ++j) ns[j] = cs + j * Nc < N ? cs + j * Nc : N - 1;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    for (int k = 0; k < Kd; ++k) {
      float av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = a(ms[i], k);
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = b(k, ns[j]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j)
        if (m0 + i < M && cs + j * Nc < N) f(m0 + i, cs + j * Nc, acc[i][j]);
  }
}

// Sets the kernel's dynamic shared memory limit to kGdnMaxSmemBytes once per kernel.
template <class Kernel>
void allow_smem(Kernel kernel) {
  static const bool done = [&] {
    AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(kGdnMaxSmemBytes)));
    return true;
  }();
  (void)done;
}

// ---- shared-memory layouts (floats), one per kernel. q and k tiles have rows of K + 1 floats:
// products read them down a column (k_j[i] for 32 consecutive j), which a row stride of K (a
// multiple of 32 banks) would serialise 32-way.

struct PrepareSmem {  // gdn_prepare_kernel
  float *k, *v, *A, *Tm, *X, *gam, *beta, *be;  // X: the blocked solve's [16, L] partial sums
  __host__ __device__ PrepareSmem(Carve& c, const Dims& d)
      : k(c.take(d.L * (d.K + 1))),
        v(c.take(d.L * (d.V + 4))),  // row stride V + 4: see kVs
        A(c.take(d.L * d.L)),
        Tm(c.take(d.L * d.L)),
        X(c.take(16 * d.L)),
        gam(c.take(d.L)),
        beta(c.take(d.L)),
        be(c.take(d.L)) {}
};

struct StateFwdSmem {                 // gdn_state_fwd_kernel
  float *S, *W, *k, *Vn, *gam, *dec;  // dec_j = D_{n-1,j}
  __host__ __device__ StateFwdSmem(Carve& c, const Dims& d)
      : S(c.take(d.K * kVs)),
        W(c.take(d.L * d.K)),
        k(c.take(d.L * (d.K + 1))),
        Vn(c.take(d.L * kVs)),
        gam(c.take(d.L)),
        dec(c.take(d.L)) {}
};

struct OutputSmem {  // gdn_output_kernel
  float *q, *k, *P, *gam, *qe, *S, *Vn;  // qe_r = scale e_r
  __host__ __device__ OutputSmem(Carve& c, const Dims& d)
      : q(c.take(d.L * (d.K + 1))),
        k(c.take(d.L * (d.K + 1))),
        P(c.take(d.L * d.L)),
        gam(c.take(d.L)),
        qe(c.take(d.L)),
        S(c.take(d.K * kVs)),
        Vn(c.take(d.L * kVs)) {}
};

struct StateBwdSmem {                                    // gdn_state_bwd_kernel
  float *dS, *q, *k, *W, *P, *dO, *dVn, *gam, *e, *dec;  // e_r, dec_j = D_{n-1,j}
  __host__ __device__ StateBwdSmem(Carve& c, const Dims& d)
      : dS(c.take(d.K * kVs)),
        q(c.take(d.L * (d.K + 1))),
        k(c.take(d.L * (d.K + 1))),
        W(c.take(d.L * d.K)),
        P(c.take(d.L * d.L)),
        dO(c.take(d.L * kVs)),
        dVn(c.take(d.L * kVs)),
        gam(c.take(d.L)),
        e(c.take(d.L)),
        dec(c.take(d.L)) {}
};

struct BwdQkSmem {  // gdn_bwd_qk_kernel
  float *q, *k, *dP, *P, *dqS, *dKh, *dW, *dO, *Vn, *dVn, *S, *dS, *gam, *x, *rp, *red;
  __host__ __device__ BwdQkSmem(Carve& c, const Dims& d)
      : q(c.take(d.L * (d.K + 1))),
        k(c.take(d.L * (d.K + 1))),
        dP(c.take(d.L * d.L)),
        P(c.take(d.L * d.L)),
        dqS(c.take(d.L * d.K)),
        dKh(c.take(d.L * d.K)),
        dW(c.take(d.L * d.K)),
        dO(c.take(d.L * kVtPad)),
        Vn(c.take(d.L * kVtPad)),
        dVn(c.take(d.L * kVtPad)),
        S(c.take(d.K * kVtPad)),
        dS(c.take(d.K * kVtPad)),
        gam(c.take(d.L)),
        x(c.take(d.L)),
        rp(c.take(d.L)),
        red(c.take(32)) {}
};

// z [L, K] is only written after the V-tile loop, so it takes the place of that loop's v, dVn and
// y tiles (contiguous, extended when L K exceeds them): 16 KB less at K = 64, two blocks per SM.
struct BwdWySmem {  // gdn_bwd_wy_kernel
  float *k, *dW, *Tm, *dTm, *M, *v, *dVn, *y, *z, *gam, *beta, *dgam, *dbeta;
  __host__ __device__ BwdWySmem(Carve& c, const Dims& d)
      : k(c.take(d.L * (d.K + 1))),
        dW(c.take(d.L * d.K)),
        Tm(c.take(d.L * d.L)),
        dTm(c.take(d.L * d.L)),
        M(c.take(d.L * d.L)),
        v(c.take(d.L * kVtPad)),
        dVn(c.take(d.L * kVtPad)),
        y(c.take(d.L * kVtPad)),
        z(c.extend(v, d.K > 3 * kVtPad ? d.L * (d.K - 3 * kVtPad) : 0)),
        gam(c.take(d.L)),
        beta(c.take(d.L)),
        dgam(c.take(d.L)),
        dbeta(c.take(d.L)) {}
};

template <class Layout>
int64_t smem_bytes(const Dims& d) {
  Carve c{nullptr};
  Layout l(c, d);
  (void)l;
  return c.used * int64_t(sizeof(float));
}

// The forward's stages (gated_delta_fwd_cuda.cu), shared with the backward, which recomputes them.
// prepare: gam, W, U (into sc.Vn) and, when sc.Tm, Tm. state_fwd: chunk start states into sc.S,
// Vn = U - W S in place, the final state into s_final when non-null.
void launch_prepare(DType t, const void* k, const void* v, const void* g, const void* beta,
                    bool gate_f32, const Dims& d, const Scratch& sc, cudaStream_t stream);
void launch_state_fwd(DType t, const void* k, const void* s0, bool state_f32, const Dims& d,
                      const Scratch& sc, float* s_final, cudaStream_t stream);

}  // namespace amor::cuda::gdn
