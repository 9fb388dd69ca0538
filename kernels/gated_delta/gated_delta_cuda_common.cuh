// Device-side pieces shared by the gated delta rule's CUDA kernels (included by .cu files only):
// the problem dimensions, the layout of the scratch between kernels, the shared-memory layout of
// every kernel (one description used by the host to size the launch and by the device to carve
// the buffer), the asynchronous tile copies, and a plain block-wide matrix product.
//
// Indexing (as gated_delta_ref_common.h): inputs are [B,T,H,D]; scratch rows are per head,
// [B*H, T, D] (bh = b*H + h), so one chunk's rows are contiguous; per-chunk states are
// [B*H, NC, K, V] with NC = ceil(T / L) chunks per sequence.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cast/cuda_device.cuh"
#include "kernels/core/env_switch.h"
#include "kernels/core/mma.cuh"
#include "kernels/core/tile.cuh"
#include "kernels/gated_delta/gated_delta_cuda.h"

namespace amor::cuda::gdn {

constexpr int kThreads = 256;  // every chunk kernel
constexpr int kVt = 32;        // V columns per tile (output and backward kernels, state passes)
// Row stride of the f32 [*, kVt] tiles (the carried states S and dS', U, y):
// tile::padded_ld<float>(kVt).
// As a B operand (gated_delta_tc.cuh) lane (g, t) reads rows 2t, 2t + 1 at column g, banks
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
  // n elements of E, rounded up to 16 bytes: a layout built only from take_as keeps every array
  // 16-byte aligned (the cp.async tile copies need it).
  template <class E>
  __host__ __device__ E* take_as(int64_t n) {
    return reinterpret_cast<E*>(take((n * int64_t(sizeof(E)) + 15) / 16 * 4));
  }
};

// The scratch between the kernels, carved from one f32 allocation (same bump order everywhere).
// Arrays that later kernels only read as tensor-core operands (W, Vn, the chunk states, Tm, dS',
// dVn, dW) are stored in T: for bf16 inputs that is exactly the rounding the operand gets anyway
// (half the traffic and half the shared tiles), for f32 inputs they stay f32 (the exact path).
// gam, U (Vn = U - W S subtracts it), and the dk and dgam partials (summed later) are f32.
// f32 words that the fused second form's ChunkRows take in U's place for BHT rows (e and dl f32,
// P bf16 64 wide; each array 16-byte aligned; gated_delta_fwd_fused.cuh).
__host__ __device__ inline int64_t chunk_rows_floats(int64_t BHT) {
  return 2 * ((BHT + 3) / 4 * 4) + 32 * BHT;
}

template <class T>
struct Scratch {
  // Forward: gam [BH,T], W [BH,T,K], U and Vn [BH,T,V] (one array for f32: Vn overwrites U in
  // place), chunk start states S [BH,NC,K,V].
  float *gam, *U;
  T *W, *Vn, *S;
  // Backward: Tm [BH,T,L], dS' per chunk [BH,NC,K,V], dVn [BH,T,V], dW [BH,T,K], the dk partial
  // [BH,T,K], the dgam partial [BH,T].
  T *Tm, *dS, *dVn, *dW;
  float *dk, *dgam;
  // Two parts: `kept` gets what the backward reads of the forward (gam, W, Vn, S and Tm when
  // with_tm), `work` the rest: U for bf16 when need_u (the state pass's input, dead after it),
  // and the backward's own arrays when backward. A forward that keeps its intermediates for the
  // backward (gated_delta_cuda.h, `saved`) carves kept from the saved buffer and work from a
  // temporary one; everywhere else both parts come from one scratch, one after the other.
  __host__ __device__ Scratch(Carve& kept, Carve& work, const Dims& d, bool with_tm, bool need_u,
                              bool backward) {
    const int64_t BHT = d.B * d.H * d.T, states = d.B * d.H * d.NC * d.K * d.V;
    gam = kept.take_as<float>(BHT);
    W = kept.take_as<T>(BHT * d.K);
    if constexpr (sizeof(T) == sizeof(float)) {
      U = kept.take_as<float>(BHT * d.V);
      Vn = reinterpret_cast<T*>(U);
    } else {
      Vn = kept.take_as<T>(BHT * d.V);
    }
    S = kept.take_as<T>(states);
    Tm = with_tm ? kept.take_as<T>(BHT * d.L) : nullptr;
    // (bf16: U's place also holds the second fused form's ChunkRows, which never forms U.)
    if constexpr (sizeof(T) != sizeof(float))
      U = need_u ? work.take_as<float>(BHT * d.V > chunk_rows_floats(BHT) ? BHT * d.V
                                                                          : chunk_rows_floats(BHT))
                 : nullptr;
    dS = dVn = dW = nullptr;
    dk = dgam = nullptr;
    if (backward) {
      dS = work.take_as<T>(states);
      dVn = work.take_as<T>(BHT * d.V);
      dW = work.take_as<T>(BHT * d.K);
      dk = work.take_as<float>(BHT * d.K);
      dgam = work.take_as<float>(BHT);
    }
  }
  // Both parts from one scratch (no intermediates kept across calls).
  __host__ __device__ Scratch(Carve& c, const Dims& d, bool backward)
      : Scratch(c, c, d, backward, true, backward) {}
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

// Compile-time shapes. A kernel instantiated with Shape<K, V, L, full> (sizes > 0) overwrites its
// Dims with them on entry, so the compiler folds every size, stride, offset and trip count that
// derives from them and unrolls the loops over them; AnyShape keeps the runtime values. full:
// every chunk has L rows (T % L == 0). Why: ncu on the H200 (tests/cuda/RESULTS.md, 2026-12-01
// session 2) found the runtime-shape kernels issue-bound, with 40-140 instructions issued per MMA.
template <int kK, int kV, int kL, bool kFull>
struct Shape {
  static constexpr bool full = kFull;
  __device__ __forceinline__ static void fix(Dims& d) {
    if constexpr (kK > 0) d.K = kK;
    if constexpr (kV > 0) d.V = kV;
    if constexpr (kL > 0) d.L = kL;
  }
};
using AnyShape = Shape<0, 0, 0, false>;

// chunk_pos for a kernel instantiated with the shape Sh (fixes d first).
template <class Sh>
__device__ __forceinline__ ChunkPos chunk_pos(Dims& d) {
  Sh::fix(d);
  ChunkPos p = chunk_pos(static_cast<const Dims&>(d));
  if constexpr (Sh::full) p.n = d.L;
  return p;
}

// Calls launch(Shape<...>{}) with the compile-time shape of the presets (K 64, V 128 and K 128,
// V 256, chunk 64; full chunks or not) where d has it and T is bf16, else with AnyShape. kOnlyK:
// a kernel already compiled for one K (> 0) gets only the shapes with that K.
template <class T, int kOnlyK = 0, class F>
void with_shape(const Dims& d, F&& launch) {
  if constexpr (sizeof(T) == 2) {
    const bool full = d.T % 64 == 0;
    if constexpr (kOnlyK == 0 || kOnlyK == 64) {
      if (d.L == 64 && d.K == 64 && d.V == 128) {
        return full ? launch(Shape<64, 128, 64, true>{}) : launch(Shape<64, 128, 64, false>{});
      }
    }
    if constexpr (kOnlyK == 0 || kOnlyK == 128) {
      if (d.L == 64 && d.K == 128 && d.V == 256) {
        return full ? launch(Shape<128, 256, 64, true>{}) : launch(Shape<128, 256, 64, false>{});
      }
    }
  }
  launch(AnyShape{});
}

// exp(x) for a kernel of storage type T: expf for f32 (the exact path), one ex2.approx for bf16
// (relative error ~2^-22, far below the bf16 rounding of every product it scales; expf's range
// reduction was 5-15% of the bf16 kernels' issued instructions, ncu 2026-12-01).
template <class T>
__device__ __forceinline__ float exp_t(float x) {
  if constexpr (sizeof(T) == 2) {
    return mma::exp2_approx(x * mma::kLog2e);
  } else {
    return expf(x);
  }
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

// ---- global -> shared tile copies, asynchronous (cp.async). Every operand tile is filled by
// tile_load: the copies of all tiles a phase needs are issued back to back (one memory latency
// for the phase, not one per tile or per batch of elements), in 16-byte pieces (8 bf16 or 4 f32
// per lane and instruction, no per-element index arithmetic), into tiles of the storage dtype
// (bf16 tiles for bf16 inputs: half the shared memory of f32 ones). The caller closes the set with
// tile_commit() and, before reading, waits with tile_wait<N>() (at most N later sets still in
// flight) and a barrier.

// Row strides of the shared tiles: tile::padded_ld (kernels/core/tile.cuh: conflict-free fragment
// reads, bf16 rows 16-byte aligned).

// rows x cols elements of E: global row r at src + r * gstride -> shared dst + r * ld. In 16-byte
// cp.async pieces when every row start is 16-byte aligned on both sides and cols fills whole
// pieces (K, V multiples of 8 for bf16, of 4 for f32); else element by element through registers
// (odd shapes only; then complete on return). Not collective; block-uniform arguments. The piece
// loops here and in tile_load_zfill stay written out: tile::for_pieces (the same walk) changed
// the fused forward kernels' machine code.
template <class E>
__device__ __forceinline__ void tile_load(const E* src, int64_t gstride, int rows, int cols, E* dst,
                                          int64_t ld) {
  constexpr int kPer = 16 / int(sizeof(E));
  const bool vec = cols % kPer == 0 && gstride % kPer == 0 && ld % kPer == 0 &&
                   reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  if (vec) {
    const int vpr = cols / kPer, count = rows * vpr;
    for (int idx = int(threadIdx.x); idx < count; idx += int(blockDim.x)) {
      const int r = idx / vpr, c = (idx - r * vpr) * kPer;
      mma::cp_async_16(dst + r * ld + c, src + r * gstride + c, true);
    }
  } else {
    batched_copy(
        rows * cols, [&](int idx) { return to_f32(src[(idx / cols) * gstride + idx % cols]); },
        [&](int idx, float v) { dst[(idx / cols) * ld + idx % cols] = from_f32<E>(v); });
  }
}

// Columns [c0, c0 + w) of rows t0 .. t0+n-1 of head (b, h) of a [B,T,H,D] tensor.
template <class E>
__device__ __forceinline__ void tile_load_rows(const E* x, const Dims& d, int64_t b, int64_t h,
                                               int64_t t0, int n, int64_t D, int64_t c0, int w,
                                               E* sm, int64_t ld) {
  tile_load(x + ((b * d.T + t0) * d.H + h) * D + c0, d.H * D, n, w, sm, ld);
}

// The same from a scratch array (rows of width D, starting at row `row0`).
template <class E>
__device__ __forceinline__ void tile_load_scratch(const E* x, int64_t row0, int n, int64_t D,
                                                  int64_t c0, int w, E* sm, int64_t ld) {
  tile_load(x + row0 * D + c0, D, n, w, sm, ld);
}

// rows x cols elements of E into a tile of `rows_pad` rows: global row r < rows at
// src + r * gstride -> shared dst + r * ld, rows rows .. rows_pad - 1 zero-filled (so a product
// whose k runs over whole 16-row steps multiplies zeros, never stale shared memory). 16-byte
// cp.async only: the caller guarantees what tile_load's vector path checks. Not collective.
template <class E>
__device__ __forceinline__ void tile_load_zfill(const E* src, int64_t gstride, int rows,
                                                int rows_pad, int cols, E* dst, int64_t ld) {
  constexpr int kPer = 16 / int(sizeof(E));
  const int vpr = cols / kPer, count = rows_pad * vpr;
  for (int idx = int(threadIdx.x); idx < count; idx += int(blockDim.x)) {
    const int r = idx / vpr, c = (idx - r * vpr) * kPer;
    mma::cp_async_16(dst + r * ld + c, src + (r < rows ? r : 0) * gstride + c, r < rows);
  }
}

// n floats src[0 .. n) -> dst, zeros up to n_pad (4-byte cp.async: src need not be 16-byte
// aligned). Not collective.
__device__ __forceinline__ void vec_load_zfill(const float* src, int n, int n_pad, float* dst) {
  for (int r = int(threadIdx.x); r < n_pad; r += int(blockDim.x))
    mma::cp_async_4(dst + r, src + (r < n ? r : 0), r < n);
}

// Buffer i (0 or 1) of a double buffer, chosen without indexing the pair (a runtime index into
// the layout's array would put the layout in local memory).
template <class P>
__device__ __forceinline__ P pick(P const (&pair)[2], int i) {
  return i ? pair[1] : pair[0];
}

__device__ __forceinline__ void tile_commit() { mma::cp_async_commit(); }
template <int N = 0>
__device__ __forceinline__ void tile_wait() {
  mma::cp_async_wait<N>();
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

// Sets the kernel's dynamic shared memory limit to kGdnMaxSmemBytes once per kernel. Kernels of
// one signature (the register passes' instantiations per K) share the type Kernel, so the kernels
// already done are told apart by address.
template <class Kernel>
void allow_smem(Kernel kernel) {
  static std::mutex mutex;
  static std::vector<Kernel> done;
  const std::lock_guard<std::mutex> lock(mutex);
  if (std::find(done.begin(), done.end(), kernel) != done.end()) return;
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(kGdnMaxSmemBytes)));
  done.push_back(kernel);
}

// ---- shared-memory layouts, one per kernel, templated on the storage dtype T: the q, k, v, dO
// tiles (and a few operand-only tiles) are T, so a bf16 block needs about half the shared memory
// of an f32 one; the scratch tiles (W, U/Vn, states, Tm, dVn, dW) and every accumulator are f32.
// Row strides: tile::padded_ld. Sizes (bytes) for bf16, K 64, V 128, L 64, and what they allow on
// an H200 (228 KB of shared memory per SM, 1 KB of it reserved per block) are noted per kernel.

template <class T>
struct PrepareSmem {      // gdn_prepare_kernel: 65 KB, three blocks per SM
  int64_t ldk, ldv, ldl;  // row strides of k, v (T) and of A, Tm, X (f32)
  T *k, *v;
  float *A, *Tm, *X, *gam, *beta, *be;  // X: the blocked solve's [16, L] partial sums
  __host__ __device__ PrepareSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldv(tile::padded_ld<T>(d.V)),
        ldl(tile::padded_ld<float>(d.L)),
        k(c.take_as<T>(d.L * ldk)),
        v(c.take_as<T>(d.L * ldv)),
        A(c.take_as<float>(d.L * ldl)),
        Tm(c.take_as<float>(d.L * ldl)),
        X(c.take_as<float>(16 * ldl)),
        gam(c.take_as<float>(d.L)),
        beta(c.take_as<float>(d.L)),
        be(c.take_as<float>(d.L)) {}
};

// The per-chunk inputs (k, U, gam) are double-buffered: chunk c + 1's are in flight while chunk c
// is computed; W (single) is reloaded once the product W S of chunk c no longer reads it. U turns
// into Vn in place (f32: the state update's operand).
template <class T>
struct StateFwdSmem {  // gdn_state_fwd_kernel: 60 KB, three blocks per SM
  int64_t ldk, ldv;    // k and W (T); vt
  float* S;
  T *W, *vt;  // vt: Vn in T, the state update's operand
  T* k[2];
  float *Vn[2], *gam[2];
  __host__ __device__ StateFwdSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldv(tile::padded_ld<T>(kVt)),
        S(c.take_as<float>(d.K * kVs)),
        W(c.take_as<T>(d.L * ldk)),
        vt(c.take_as<T>(d.L * ldv)) {
    for (int i = 0; i < 2; ++i) {
      k[i] = c.take_as<T>(d.L * ldk);
      Vn[i] = c.take_as<float>(d.L * kVs);
      gam[i] = c.take_as<float>(d.L);
    }
  }
};

// The [K, 32] state and [L, 32] Vn tiles are double-buffered: the next V tile loads while the
// current one is multiplied. P is only a tensor-core operand: kept in T.
template <class T>
struct OutputSmem {  // gdn_output_kernel: 48 KB, three blocks per SM (registers)
  int64_t ldk, ldp, ldv;
  T *q, *k, *P;
  float *gam, *qe;  // qe_r = scale e_r
  T *S[2], *Vn[2];
  __host__ __device__ OutputSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldp(tile::padded_ld<T>(d.L)),
        ldv(tile::padded_ld<T>(kVt)),
        q(c.take_as<T>(d.L * ldk)),
        k(c.take_as<T>(d.L * ldk)),
        P(c.take_as<T>(d.L * ldp)),
        gam(c.take_as<float>(d.L)),
        qe(c.take_as<float>(d.L)) {
    for (int i = 0; i < 2; ++i) {
      S[i] = c.take_as<T>(d.K * ldv);
      Vn[i] = c.take_as<T>(d.L * ldv);
    }
  }
};

// q, k, dO, W and gam double-buffered (the next chunk's in flight while this one is computed).
// P, K~ = diag(dec) K and dVn are only tensor-core operands, so they are kept in T (for bf16 the
// operand's own rounding).
template <class T>
struct StateBwdSmem {     // gdn_state_bwd_kernel: 97 KB, two blocks per SM
  int64_t ldk, ldo, ldp;  // q, k, K~, W: ldk; dO, dVn: ldo
  float* dS;
  T *P, *kd, *dVn;
  T *q[2], *k[2], *dO[2], *W[2];
  float* gam[2];
  __host__ __device__ StateBwdSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldo(tile::padded_ld<T>(kVt)),
        ldp(tile::padded_ld<T>(d.L)),
        dS(c.take_as<float>(d.K * kVs)),
        P(c.take_as<T>(d.L * ldp)),
        kd(c.take_as<T>(d.L * ldk)),
        dVn(c.take_as<T>(d.L * ldo)) {
    for (int i = 0; i < 2; ++i) {
      q[i] = c.take_as<T>(d.L * ldk);
      k[i] = c.take_as<T>(d.L * ldk);
      dO[i] = c.take_as<T>(d.L * ldo);
      W[i] = c.take_as<T>(d.L * ldk);
      gam[i] = c.take_as<float>(d.L);
    }
  }
};

// V is reduced in tiles of kQkVt = 32 columns; P takes the place of the V tiles after the loop.
constexpr int kQkVt = 32;
template <class T>
struct BwdQkSmem {             // gdn_bwd_qk_kernel: 112 KB, two blocks per SM
  int64_t ldk, ldl, ldw, ldt;  // ldt: the V tiles (T)
  T *q, *k, *dO, *Vn, *dVn, *S, *dS;
  float *dP, *dqS, *dKh, *dW, *gam, *x, *rp, *red, *P;
  __host__ __device__ BwdQkSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldl(tile::padded_ld<float>(d.L)),
        ldw(tile::padded_ld<float>(d.K)),
        ldt(tile::padded_ld<T>(kQkVt)),
        q(c.take_as<T>(d.L * ldk)),
        k(c.take_as<T>(d.L * ldk)) {
    dP = c.take_as<float>(d.L * ldl);
    dqS = c.take_as<float>(d.L * ldw);
    dKh = c.take_as<float>(d.L * ldw);
    dW = c.take_as<float>(d.L * ldw);
    gam = c.take_as<float>(d.L);
    x = c.take_as<float>(d.L);
    rp = c.take_as<float>(d.L);
    red = c.take_as<float>(32);
    // The V tiles, then P over them (the larger of the two).
    Carve size{nullptr};
    for (int i = 0; i < 3; ++i) size.take_as<T>(d.L * ldt);  // the same takes as below
    for (int i = 0; i < 2; ++i) size.take_as<T>(d.K * ldt);
    const int64_t region = size.used > d.L * ldl ? size.used : d.L * ldl;
    P = c.take_as<float>(region);
    Carve r{P};
    dO = r.take_as<T>(d.L * ldt);
    Vn = r.take_as<T>(d.L * ldt);
    dVn = r.take_as<T>(d.L * ldt);
    S = r.take_as<T>(d.K * ldt);
    dS = r.take_as<T>(d.K * ldt);
  }
};

// z [L, K] is only written after the V-tile loop, so it takes the place of that loop's v, dVn
// (double-buffered) and y tiles.
template <class T>
struct BwdWySmem {                   // gdn_bwd_wy_kernel: 91 KB, two blocks per SM
  int64_t ldk, ldz, ldl, ldtm, ldv;  // k, dW: ldk (T); z: ldz; dTm, M: ldl; Tm: ldtm (T); v, dVn
  T *k, *dW, *Tm, *v[2], *dVn[2];  // v, dVn: double-buffered V tiles
  float *dTm, *M, *gam, *beta, *dgam, *dbeta, *y, *z;
  __host__ __device__ BwdWySmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldz(tile::padded_ld<float>(d.K)),
        ldl(tile::padded_ld<float>(d.L)),
        ldtm(tile::padded_ld<T>(d.L)),
        ldv(tile::padded_ld<T>(kVt)),
        k(c.take_as<T>(d.L * ldk)),
        dW(c.take_as<T>(d.L * ldk)),
        Tm(c.take_as<T>(d.L * ldtm)) {
    dTm = c.take_as<float>(d.L * ldl);
    M = c.take_as<float>(d.L * ldl);
    gam = c.take_as<float>(d.L);
    beta = c.take_as<float>(d.L);
    dgam = c.take_as<float>(d.L);
    dbeta = c.take_as<float>(d.L);
    Carve size{nullptr};
    for (int i = 0; i < 2; ++i) {  // the same takes as below
      size.take_as<T>(d.L * ldv);
      size.take_as<T>(d.L * ldv);
    }
    size.take_as<float>(d.L * kVs);
    const int64_t region = size.used > d.L * ldz ? size.used : d.L * ldz;
    z = c.take_as<float>(region);
    Carve r{z};
    for (int i = 0; i < 2; ++i) {
      v[i] = r.take_as<T>(d.L * ldv);
      dVn[i] = r.take_as<T>(d.L * ldv);
    }
    y = r.take_as<float>(d.L * kVs);
  }
};

// ---- the register-state passes (gdn_state_fwd_reg_kernel, gdn_state_bwd_wide_kernel): each warp
// owns 16 columns of V and keeps its [16, K] slice of the transposed state in MMA accumulator
// registers (f32); the block's warps share the chunk's [L, K] operand tiles, double-buffered.
// bf16 only (the f32 path keeps the exact SIMT passes), K one of kRegStateK, V a multiple of 16.
constexpr int kRegCols = 16;  // V columns per warp (the MMA's 16 rows)
inline constexpr int kRegStateK[] = {32, 48, 64, 128};

// Which passes run (AMOR_GDN_VARIANT, read once; env_switch.h refuses other values): "tile" the
// shared-memory state passes (32 columns of V per block of 8 warps, every shape) and the
// separate output kernel; "reg" the register state passes where they apply, output kernel
// separate (gdn_output_kernel); "fused" as "reg", with the forward's output computed inside its
// register state pass (K <= 64, and one block of the pass per SM or more: fused_output_ok);
// "split" (the default) as "reg" with the register-fragment output kernel
// (gated_delta_output_tc_cuda.cu) where it applies. Warps per block of the register passes:
// AMOR_GDN_STATE_WARPS (1, 2 or 4, default 4; fewer give more, smaller blocks, and reload the
// shared tiles more often).
enum class Variant { kTile, kReg, kFused, kSplit };
inline Variant variant() {
  static const Variant v = [] {
    const std::string s = env_choice("AMOR_GDN_VARIANT", {"split", "tile", "reg", "fused"}, "split");
    return s == "tile"    ? Variant::kTile
           : s == "reg"   ? Variant::kReg
           : s == "fused" ? Variant::kFused
                          : Variant::kSplit;
  }();
  return v;
}
// The backward's bwd_qk (AMOR_GDN_QK, read once): "tile" the kernel summing over V in shared
// memory; "reg" (the default) the one summing in MMA accumulators where it applies (bf16, the
// register passes' shapes with K <= 64).
inline bool qk_variant_reg() {
  static const bool reg = env_choice("AMOR_GDN_QK", {"reg", "tile"}, "reg") == "reg";
  return reg;
}
// The backward's bwd_wy (AMOR_GDN_WY, read once): "tile" the block-wide shared-memory kernel;
// "reg" (the default) the register-fragment kernel where it applies (bf16, the register passes'
// K, V and chunk multiples of 16).
inline bool wy_variant_reg() {
  static const bool reg = env_choice("AMOR_GDN_WY", {"reg", "tile"}, "reg") == "reg";
  return reg;
}
// The forward's prepare (AMOR_GDN_PREPARE, read once): "tile" the block-wide kernel with the
// f32 SIMT solve; "reg" (the default) the register-fragment kernel where it applies (bf16, K and
// V multiples of 16, chunk a multiple of 16 up to 64).
inline bool prepare_variant_reg() {
  static const bool reg = env_choice("AMOR_GDN_PREPARE", {"reg", "tile"}, "reg") == "reg";
  return reg;
}
inline int reg_state_warps() {
  static const int w = std::stoi(env_choice("AMOR_GDN_STATE_WARPS", {"1", "2", "4"}, "4"));
  return w;
}

template <class T>
inline bool reg_state_ok(const Dims& d, const void* k) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    bool k_ok = false;
    for (int kk : kRegStateK) k_ok = k_ok || d.K == kk;
    return variant() != Variant::kTile && k_ok && d.V % kRegCols == 0 &&
           reinterpret_cast<uintptr_t>(k) % 16 == 0;
  }
}

// Rows of the register passes' operand tiles: the chunk rounded up to whole 16-row MMA steps.
__host__ __device__ inline int64_t reg_rows(const Dims& d) { return (d.L + 15) / 16 * 16; }

// gdn_prepare_reg_kernel: a warp per 16-row block of the chunk (kPrepWarps of them, L <= 64).
// k [R, K] and v [R, V] (bf16, zero-filled past the chunk; scaled in place to K~, V~), the
// solve's Tm in two bf16 tiles [R, R], hi = bf16(Tm) (the products' operand and what the backward
// keeps) and lo = bf16(Tm - hi); before lo holds Tm, its place is the warps' f32 scratch for the
// diagonal blocks (kPrepDiag floats each: A_ii and Tm_ii, [16, 17] each). 46 KB for K 64, V 128,
// L 64 (four blocks per SM); 70 KB for K 128, V 256 (three).
// lo_in_v: lo and the scratch take the v tile's place, which then holds q [R, K] for the P the
// Tm-only forms compute first (gated_delta_fwd_cuda.cu waits for every warp's P before the
// scratch is written): 29 KB for K 64 (seven blocks per SM by shared memory, where a separate lo
// left five), 45 KB for K 128 (five, was four).
constexpr int kPrepWarps = int(kGdnMaxChunk) / 16;
constexpr int kPrepDiag = 2 * 16 * 17;
template <class T>
struct PrepareRegSmem {
  int64_t ldk, ldv, ldl;
  T *k, *v, *th, *tl;
  float *graw, *gam, *beta, *be;
  __host__ __device__ PrepareRegSmem(Carve& c, const Dims& d, bool lo_in_v = false)
      : ldk(tile::padded_ld<T>(d.K)),
        ldv(tile::padded_ld<T>(d.V)),
        ldl(tile::padded_ld<T>(reg_rows(d))) {
    const int64_t R = reg_rows(d);
    k = c.take_as<T>(R * ldk);
    const int64_t lo = R * ldl * int64_t(sizeof(T)), scratch = kPrepWarps * kPrepDiag * 4;
    const int64_t lo_bytes = lo > scratch ? lo : scratch;
    const int64_t v_bytes = R * ldv * int64_t(sizeof(T));
    v = reinterpret_cast<T*>(c.take_as<char>(lo_in_v && lo_bytes > v_bytes ? lo_bytes : v_bytes));
    th = c.take_as<T>(R * ldl);
    tl = lo_in_v ? v : reinterpret_cast<T*>(c.take_as<char>(lo_bytes));
    graw = c.take_as<float>(R);
    gam = c.take_as<float>(R);
    beta = c.take_as<float>(R);
    be = c.take_as<float>(R);
  }
};

// gdn_bwd_qk_reg_kernel: the V reductions in MMA accumulators, V in tiles of kQkRegVt columns,
// double-buffered; once the loop is done, dP, P (f32 [R, R]) and the warps' parts of the two K
// reductions (f32 [2][2 KS][R], KS = 1 for K <= 64, else 2) take the tiles' place.
// R = reg_rows(d) rows everywhere (zero-filled past the chunk). 111 KB for bf16, K 64, V 128,
// L 64: two blocks per SM; 164 KB for K 128, V 256: one.
constexpr int kQkRegVt = 64;
template <class T>
struct BwdQkRegSmem {
  int64_t ldk, ldl, ldt;  // q, k: ldk (T); dP, P: ldl; V tiles: ldt (T)
  T *q, *k;
  T *dO[2], *Vn[2], *dVn[2], *S[2], *dS[2];
  float *dP, *P, *parts, *gam, *x, *rp, *red;
  __host__ __device__ BwdQkRegSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldl(tile::padded_ld<float>(reg_rows(d))),
        ldt(tile::padded_ld<T>(kQkRegVt)) {
    const int64_t R = reg_rows(d);
    q = c.take_as<T>(R * ldk);
    k = c.take_as<T>(R * ldk);
    gam = c.take_as<float>(R);
    x = c.take_as<float>(R);
    rp = c.take_as<float>(R);
    red = c.take_as<float>(32);
    float* const region = c.base ? c.base + c.used : nullptr;
    Carve tiles{region}, sums{region};
    for (int i = 0; i < 2; ++i) {
      dO[i] = tiles.take_as<T>(R * ldt);
      Vn[i] = tiles.take_as<T>(R * ldt);
      dVn[i] = tiles.take_as<T>(R * ldt);
      S[i] = tiles.take_as<T>(d.K * ldt);
      dS[i] = tiles.take_as<T>(d.K * ldt);
    }
    dP = sums.take_as<float>(R * ldl);
    P = sums.take_as<float>(R * ldl);
    parts = sums.take_as<float>(4 * (d.K > 64 ? 2 : 1) * R);
    c.take_as<float>(tiles.used > sums.used ? tiles.used : sums.used);
  }
};

// gdn_bwd_wy_reg_kernel: a warp per 16-row block of the chunk (kWyWarps of them, L <= 64), the
// products in MMA fragments. k, dW, Tm ([R, K], [R, R], bf16) stay for the whole block; the V
// tiles (v, dVn: kWyVt columns, double-buffered) are only read in the loop over V, so the f32 dk
// partial, N = dTm Tm^T and E (bf16 [R, R], the two tiles the warps exchange) take their place
// after it (for K <= 64 the dk partial fits buffer 0, free during the last tile when the tile
// count is even: its copies start then). R = reg_rows(d) rows everywhere (zero-filled past the chunk). 65 KB for bf16, K 64,
// V 128, L 64 (three blocks per SM); 97 KB for K 128, V 256 (two).
constexpr int kWyWarps = int(kGdnMaxChunk) / 16;
constexpr int kWyVt = 64;
template <class T>
struct BwdWyRegSmem {
  // k, dW: ldk; Tm, N, E: ldl; v, dVn: ldv (all T); the f32 dk part: ldp = K + 8 (a float2
  // per lane at rows g, columns 2t: banks 8 g + 2 t, conflict-free per half warp; K + 4 is 2-way)
  int64_t ldk, ldl, ldv, ldp;
  T *k, *dW, *Tm, *N, *E;
  T *v[2], *dVn[2];
  float *dkp, *gam, *beta, *dgp, *dgam, *dbeta, *csp;  // csp: [kWyWarps, R] column sums
  __host__ __device__ BwdWyRegSmem(Carve& c, const Dims& d)
      : ldk(tile::padded_ld<T>(d.K)),
        ldl(tile::padded_ld<T>(reg_rows(d))),
        ldv(tile::padded_ld<T>(kWyVt)),
        ldp(d.K + 8) {
    const int64_t R = reg_rows(d);
    k = c.take_as<T>(R * ldk);
    dW = c.take_as<T>(R * ldk);
    Tm = c.take_as<T>(R * ldl);
    gam = c.take_as<float>(R);
    beta = c.take_as<float>(R);
    dgp = c.take_as<float>(R);
    dgam = c.take_as<float>(R);
    dbeta = c.take_as<float>(R);
    csp = c.take_as<float>(kWyWarps * R);
    float* const region = c.base ? c.base + c.used : nullptr;
    Carve tiles{region}, after{region};
    for (int i = 0; i < 2; ++i) {
      v[i] = tiles.take_as<T>(R * ldv);
      dVn[i] = tiles.take_as<T>(R * ldv);
    }
    dkp = after.take_as<float>(R * ldp);  // over buffer 0 (v[0], dVn[0]) when K <= 64
    N = after.take_as<T>(R * ldl);
    E = after.take_as<T>(R * ldl);
    c.take_as<float>(tiles.used > after.used ? tiles.used : after.used);
  }
};

// The forward's pass: k and W of a chunk (T, [R, K]) and its gam, double-buffered; with the
// output fused, also q (double-buffered) and P [R, R] (computed per chunk).
// A warp's staging tile [max(K, R), 16] bf16 (kStageLd: 48-byte rows, conflict-free for
// stmatrix) through which the forward's register pass stores its per-chunk results (S, Vn)
// whose fragments are transposed against the [rows, V] arrays: the packed bf16 pairs of a 16 x 16
// block of a C-fragment pair (X^T) are an A fragment, which stmatrix.trans writes as the block of
// X (tile::store_a_trans: lane 8 m + rr gives row 16 blk + 8 (m / 2) + rr, column 8 (m % 2));
// flush then stores the rows as 16-byte pieces. ncu (2026-12-01 session 3): the shuffled 4-byte
// pair stores (store_row_pairs) this replaces were a quarter of the forward pass's instructions.
constexpr int kStageLd = kRegCols + 8;
__host__ __device__ inline int64_t stage_rows(const Dims& d) {
  return d.K > reg_rows(d) ? d.K : reg_rows(d);
}
struct WarpStage {
  bf16_t* tile;
  int lane;
  __device__ __forceinline__ WarpStage(bf16_t* base, const Dims& d)
      : tile(base + (threadIdx.x / 32) * stage_rows(d) * kStageLd), lane(int(threadIdx.x) % 32) {}
  // Block blk (rows 16 blk ..) of X from the A-fragment packing p of X^T's C fragments.
  __device__ __forceinline__ void put(int blk, const uint32_t (&p)[4]) const {
    tile::store_a_trans(tile, kStageLd, 0, 16 * blk, lane, p);
  }
  // Rows < rows of the tile to x[r * stride + c0 ..  c0 + 15]; the tile is free again on return.
  __device__ __forceinline__ void flush(bf16_t* x, int64_t stride, int64_t c0, int rows) const {
    mma::sync_warp();
    for (int i = lane; i < 2 * rows; i += 32) {
      const int r = i / 2, h8 = 8 * (i % 2);
      *reinterpret_cast<uint4*>(x + r * stride + c0 + h8) =
          *reinterpret_cast<const uint4*>(tile + r * kStageLd + h8);
    }
    mma::sync_warp();
  }
};
template <class T>
struct StateFwdRegSmem {
  int64_t ld, ldp;  // tile::padded_ld<T>(K), tile::padded_ld<T>(R)
  T *P, *stage;
  T *k[2], *W[2], *q[2];
  float* gam[2];
  __host__ __device__ StateFwdRegSmem(Carve& c, const Dims& d, bool fused, int warps)
      : ld(tile::padded_ld<T>(d.K)), ldp(tile::padded_ld<T>(reg_rows(d))) {
    const int64_t R = reg_rows(d);
    P = fused ? c.take_as<T>(R * ldp) : nullptr;
    stage = fused ? nullptr : c.take_as<T>(warps * stage_rows(d) * kStageLd);
    for (int i = 0; i < 2; ++i) {
      k[i] = c.take_as<T>(R * ld);
      W[i] = c.take_as<T>(R * ld);
      q[i] = fused ? c.take_as<T>(R * ld) : nullptr;
      gam[i] = c.take_as<float>(R);
    }
  }
};

// A warp's register tiles hold, per lane (g = lane / 4, t = lane % 4), the C fragments of 16 x 8
// tiles: element e of tile j is row g + 8 (e / 2), column 8 j + 2 t + e % 2. store_row_pairs
// writes such a tile's pair p (the bf16 elements e = 0, 1 or e = 2, 3: columns i, i + 1 of row
// `row`) to a row-major array x where the tile is transposed: x[i][row], x[i + 1][row]. The lanes
// g, g ^ 1 (lane ^ 4) hold neighbouring rows, so they trade halves and each lane stores one
// 4-byte pair of neighbouring x columns: the even lane x[i][row .. row + 1], the odd one
// x[i + 1][row - 1 .. row]. Only x rows < n are written. Warp-collective (the shuffle).
template <class T>
__device__ __forceinline__ void store_row_pairs(T* x, int64_t stride, int i, int64_t row,
                                                uint32_t p, int n) {
  const uint32_t o = __shfl_xor_sync(0xffffffffu, p, 4);
  const int odd = int(threadIdx.x / 4) & 1;
  const uint32_t v = odd ? (o >> 16) | (p & 0xffff0000u) : (p & 0xffffu) | (o << 16);
  if (i + odd < n) *reinterpret_cast<uint32_t*>(x + (i + odd) * stride + row - odd) = v;
}

template <class Layout, class... Args>
int64_t smem_bytes(const Dims& d, Args... args) {
  Carve c{nullptr};
  Layout l(c, d, args...);
  (void)l;
  return c.used * int64_t(sizeof(float));
}

// The forward's stages (gated_delta_fwd_cuda.cu), shared with the backward, which recomputes them.
// prepare: gam, W, U and, when sc.Tm, Tm. state_fwd: chunk start states into sc.S, Vn = U - W S,
// the final state into s_final when non-null. Instantiated for float and bf16_t.
template <class T>
void launch_prepare(const T* k, const T* v, const void* g, const void* beta, bool gate_f32,
                    const Dims& d, const Scratch<T>& sc, cudaStream_t stream);
template <class T>
void launch_state_fwd(const T* k, const void* s0, bool state_f32, const Dims& d,
                      const Scratch<T>& sc, float* s_final, cudaStream_t stream);
// What the backward reads of the forward (gam, W, Tm when sc.Tm, S, Vn) into sc, as the forward
// that keeps them computes them (the same bits): the fused pass's where it applies
// (gated_delta_fwd_fused.cuh, fused_keep_ok), else launch_prepare and launch_state_fwd.
template <class T>
void launch_intermediates(const T* k, const T* v, const void* g, const void* beta, bool gate_f32,
                          const void* s0, bool state_f32, const Dims& d, const Scratch<T>& sc,
                          float* s_final, cudaStream_t stream);

// The output from the chunk start states and Vn in sc (gated_delta_output_tc_cuda.cu): bf16,
// chunk 64, K 64 or 128, V a multiple of 64, 16-byte aligned q, k, o, the default variant.
bool output_tc_ok(const Dims& d, const void* q, const void* k, const void* o);
void launch_output_tc(const bf16_t* q, const bf16_t* k, float scale, const Dims& d,
                      const Scratch<bf16_t>& sc, bf16_t* o, cudaStream_t stream);
int64_t output_tc_smem_bytes(const Dims& d);

}  // namespace amor::cuda::gdn
