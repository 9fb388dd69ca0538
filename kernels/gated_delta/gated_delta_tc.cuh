// Block-wide matrix products of the gated delta rule's chunk kernels on tensor cores (included by
// the .cu files only, after gated_delta_cuda_common.cuh).
//
// block_mma(M, N, Kd, a, b, f) has block_mm's contract: for every (m, n) of [0,M) x [0,N) it calls
// f(m, n, sum_{k<Kd} a(m,k) b(k,n)), each output by one thread that depends only on M and N (so
// calls accumulating into one array need no barrier between them). The operands are shared-memory
// tiles, rounded to bf16 (nearest even) and multiplied by warp mma.sync m16n8k16
// (kernels/core/mma.cuh) with f32 accumulation:
//   - a warp takes a job of 16 rows x 8*NT columns (NT n8-tiles sharing one A fragment), jobs are
//     dealt round-robin over the block's warps; NT = 4 when that still gives every warp a job,
//     else 2 (the state-pass tiles are only 64 x 32);
//   - k advances in steps of 16; indices past M, N or Kd read as zeros, so any M, N, Kd work
//     (tails, K = 8, concatenations at any k).
// How a fragment is read depends on what the operand offers, fastest first:
//   1. ldmatrix (one instruction per A fragment or per two B n-tiles): bf16 tiles read plainly
//      (RowA, ColB, ColA, RowB and their concatenations CatA, CatB below), for the k steps whose
//      16 x 16 blocks lie inside M, N, Kd (all of them for full chunks);
//   2. pairs (one or two loads per fragment register, no bounds check per element): the same
//      operands on f32 tiles, or at the tails;
//   3. element by element through an accessor lambda (any operand, e.g. A = dTm + dTm^T): two
//      loads, conversions and bounds checks per register.
// Operands that used to be scaled on the fly (diag(beta e) K, scale diag(e) Q, diag(dec) K, -W)
// are scaled once in shared memory by the kernels, so they take path 1; for bf16 that is the same
// rounding (nearest even of the same f32 product). The bit patterns of 1 and 2 are those of 3.
// Epilogues may take two neighbouring columns per call (Epi below): 4- or 8-byte stores.
//
// A triangular A operand (Tri::kLower / kUpper, promised by the caller) skips the k steps that
// would only multiply its zeros: 10 of 16 steps for a 64 x 64 triangle.
//
// Every call is warp-collective (the MMAs): all threads of the block must reach it together,
// as for block_mm's barrier-free use in the kernels.
//
// block_mm_t<T> picks the product per storage dtype: tensor cores for bf16 inputs, the exact
// SIMT block_mm for f32 inputs (the f32 path's parity stays <= 1e-5; it calls the operands'
// plain accessors and the per-element epilogue).
#pragma once
#include <type_traits>
#include <utility>

#include "kernels/core/mma.cuh"
#include "kernels/core/tile.cuh"
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"

namespace amor::cuda::gdn {

// Which zeros of the A operand the caller promises (the k steps of a job that would only multiply
// them are skipped): none, lower triangular (a(m, k) = 0 for k > m: Tm, P, dP) or upper
// triangular (a(m, k) = 0 for k < m: their transposes).
enum class Tri { kFull, kLower, kUpper };

// Two neighbouring elements p[0], p[1] (4-byte aligned for bf16, 8-byte for f32) as one fragment
// register: bf16 pairs are the register as stored, f32 pairs are rounded as pack_bf16x2 would.
__device__ __forceinline__ uint32_t load_pair(const bf16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ uint32_t load_pair(const float* p) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  return mma::pack_bf16x2(v.x, v.y);
}

// Operands read unscaled from a row-major shared tile x [*, ld] of E (bf16 or f32) with k along
// the row: RowA, a(m, k) = x[m ld + k] (an A operand: Q, dO, W, Tm, dP ...) and ColB,
// b(k, n) = x[n ld + k] (a B operand stored n-major: K^T, Vn^T, S^T ...). Consecutive k are
// neighbours in memory, so block_mma reads the two elements of a fragment register with one load
// (pair) where the generic accessors cost two loads and two conversions. Plain accessors too
// (operator()), for the SIMT path and the tails. pair needs an even ld (checked: pairable).
//
// bf16 tiles whose rows are 16-byte aligned (ld a multiple of 8, as tile::padded_ld gives for K,
// V, L multiples of 8) also load whole fragments with ldmatrix (kernels/core/tile.cuh): frag_a
// the A fragment of rows m0.. and k0.., frag_b2 the B fragments b[4] of two n-tiles n0.., n0 + 8..
// (one ldmatrix.x4 each; ColA, RowB read .trans). block_mma uses them for the k steps whose
// 16 x 16 (A) or 16 x 16 (B, two n-tiles) block lies entirely inside M, N, Kd; the bit patterns
// are the ones the pairs would give.

template <class E>
struct RowA {
  const E* x;
  int64_t ld;
  __device__ __forceinline__ float operator()(int m, int k) const { return to_f32(x[m * ld + k]); }
  __device__ __forceinline__ uint32_t pair(int m, int k) const { return load_pair(x + m * ld + k); }
  __device__ __forceinline__ bool pairable() const { return ld % 2 == 0; }
  __device__ __forceinline__ bool ldsm() const { return tile::ldsm_ok(x, ld); }
  __device__ __forceinline__ void frag_a(int m0, int k0, int lane, uint32_t (&af)[4]) const {
    tile::frag_a(af, x, ld, m0, k0, lane);
  }
};
template <class E>
struct ColB {
  const E* x;
  int64_t ld;
  __device__ __forceinline__ float operator()(int k, int n) const { return to_f32(x[n * ld + k]); }
  __device__ __forceinline__ uint32_t pair(int k, int n) const { return load_pair(x + n * ld + k); }
  __device__ __forceinline__ bool pairable() const { return ld % 2 == 0; }
  __device__ __forceinline__ bool ldsm() const { return tile::ldsm_ok(x, ld); }
  __device__ __forceinline__ void frag_b2(int k0, int n0, int lane, uint32_t (&b)[4]) const {
    tile::frag_b2(b, x, ld, k0, n0, lane);
  }
};

// The same from two elements of different rows: bf16 pairs are the two stored halves (no
// conversion), f32 ones rounded as pack_bf16x2 would.
__device__ __forceinline__ uint32_t load_pair(const bf16_t* lo, const bf16_t* hi) {
  return uint32_t(*reinterpret_cast<const uint16_t*>(lo)) |
         (uint32_t(*reinterpret_cast<const uint16_t*>(hi)) << 16);
}
__device__ __forceinline__ uint32_t load_pair(const float* lo, const float* hi) {
  return mma::pack_bf16x2(*lo, *hi);
}

// Unscaled operands with k down the columns of a row-major tile: ColA, a(m, k) = x[k ld + m] (a
// transposed A: Tm^T, dP^T) and RowB, b(k, n) = x[k ld + n] (a row-major B: S, Vn, dVn, K in
// dP K). Their pairs take two loads, but skip the f32 round trip (bf16) and the bounds checks.
template <class E>
struct ColA {
  const E* x;
  int64_t ld;
  __device__ __forceinline__ float operator()(int m, int k) const { return to_f32(x[k * ld + m]); }
  __device__ __forceinline__ uint32_t pair(int m, int k) const {
    return load_pair(x + k * ld + m, x + (k + 1) * ld + m);
  }
  __device__ __forceinline__ bool pairable() const { return true; }
  __device__ __forceinline__ bool ldsm() const { return tile::ldsm_ok(x, ld); }
  __device__ __forceinline__ void frag_a(int m0, int k0, int lane, uint32_t (&af)[4]) const {
    tile::frag_a_trans(af, x, ld, m0, k0, lane);
  }
};
template <class E>
struct RowB {
  const E* x;
  int64_t ld;
  __device__ __forceinline__ float operator()(int k, int n) const { return to_f32(x[k * ld + n]); }
  __device__ __forceinline__ uint32_t pair(int k, int n) const {
    return load_pair(x + k * ld + n, x + (k + 1) * ld + n);
  }
  __device__ __forceinline__ bool pairable() const { return true; }
  __device__ __forceinline__ bool ldsm() const { return tile::ldsm_ok(x, ld); }
  __device__ __forceinline__ void frag_b2(int k0, int n0, int lane, uint32_t (&b)[4]) const {
    tile::frag_b2_trans(b, x, ld, k0, n0, lane);
  }
};

// Concatenations along k of two such operands: CatA, a(m, k) = [a1 | a2] (a1 for k < k1, then
// a2 at k - k1) and CatB, b(k, n) = [b1; b2]. The products O = [Q~ | P] [S; Vn] and the state
// passes' [P^T | K~] [dO; dS] are one product each. ldmatrix when both parts allow it and k1 is a
// multiple of 16 (no 16-wide k step straddles the seam); pairs straddling the seam (k1 odd) are
// read element by element.
template <class A1, class A2>
struct CatA {
  A1 a1;
  A2 a2;
  int k1;
  __device__ __forceinline__ float operator()(int m, int k) const {
    return k < k1 ? a1(m, k) : a2(m, k - k1);
  }
  __device__ __forceinline__ uint32_t pair(int m, int k) const {
    if (k + 1 < k1) return a1.pair(m, k);
    if (k >= k1) return a2.pair(m, k - k1);
    return mma::pack_bf16x2(a1(m, k), a2(m, 0));
  }
  __device__ __forceinline__ bool pairable() const {
    return a1.pairable() && a2.pairable() && k1 % 2 == 0;
  }
  __device__ __forceinline__ bool ldsm() const { return a1.ldsm() && a2.ldsm() && k1 % 16 == 0; }
  __device__ __forceinline__ void frag_a(int m0, int k0, int lane, uint32_t (&af)[4]) const {
    if (k0 < k1)
      a1.frag_a(m0, k0, lane, af);
    else
      a2.frag_a(m0, k0 - k1, lane, af);
  }
};
template <class B1, class B2>
struct CatB {
  B1 b1;
  B2 b2;
  int k1;
  __device__ __forceinline__ float operator()(int k, int n) const {
    return k < k1 ? b1(k, n) : b2(k - k1, n);
  }
  __device__ __forceinline__ uint32_t pair(int k, int n) const {
    if (k + 1 < k1) return b1.pair(k, n);
    if (k >= k1) return b2.pair(k - k1, n);
    return mma::pack_bf16x2(b1(k, n), b2(0, n));
  }
  __device__ __forceinline__ bool pairable() const {
    return b1.pairable() && b2.pairable() && k1 % 2 == 0;
  }
  __device__ __forceinline__ bool ldsm() const { return b1.ldsm() && b2.ldsm() && k1 % 16 == 0; }
  __device__ __forceinline__ void frag_b2(int k0, int n0, int lane, uint32_t (&f)[4]) const {
    if (k0 < k1)
      b1.frag_b2(k0, n0, lane, f);
    else
      b2.frag_b2(k0 - k1, n0, lane, f);
  }
};
template <class A1, class A2>
CatA(A1, A2, int) -> CatA<A1, A2>;
template <class B1, class B2>
CatB(B1, B2, int) -> CatB<B1, B2>;

// Epilogues. f(m, n, x) is called per element; an epilogue that also takes (m, n, x0, x1) gets
// the neighbouring columns n, n + 1 (n even) of a row in one call wherever both are in range, so
// its global stores can be 4-byte (bf16 pairs) or 8-byte (f32 pairs) instead of two.
// Epi{per_element, per_pair} makes one epilogue of the two (the SIMT path calls the first only).
template <class... Fs>
struct Epi : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Epi(Fs...) -> Epi<Fs...>;

// p[i], p[i + 1] = x0, x1 (rounded to E): one store when i is even (a pair of an even-aligned
// array), two otherwise (odd row lengths).
__device__ __forceinline__ void store2(float* p, int64_t i, float x0, float x1) {
  if (i % 2 == 0) {
    *reinterpret_cast<float2*>(p + i) = make_float2(x0, x1);
  } else {
    p[i] = x0;
    p[i + 1] = x1;
  }
}
__device__ __forceinline__ void store2(bf16_t* p, int64_t i, float x0, float x1) {
  if (i % 2 == 0) {
    *reinterpret_cast<uint32_t*>(p + i) = mma::pack_bf16x2(x0, x1);
  } else {
    p[i] = from_f32<bf16_t>(x0);
    p[i + 1] = from_f32<bf16_t>(x1);
  }
}

// p[i] = a p[i] + x0, p[i + 1] = a p[i + 1] + x1 on f32 shared memory (accumulators, the carried
// states): one 8-byte load and store when i is even.
__device__ __forceinline__ void axpy2(float* p, int64_t i, float a, float x0, float x1) {
  if (i % 2 == 0) {
    float2 v = *reinterpret_cast<float2*>(p + i);
    v.x = a * v.x + x0;
    v.y = a * v.y + x1;
    *reinterpret_cast<float2*>(p + i) = v;
  } else {
    p[i] = a * p[i] + x0;
    p[i + 1] = a * p[i + 1] + x1;
  }
}

template <int NT, Tri tri, class A, class Bm, class F>
__device__ __forceinline__ void block_mma_nt(int M, int N, int Kd, A a, Bm b, F f) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int nwarps = int(blockDim.x) / 32;
  const int g = lane / 4, t = lane % 4;
  const int Mt = (M + 15) / 16, Nt = (N + 8 * NT - 1) / (8 * NT);
  auto ga = [&](int m, int k) { return m < M && k < Kd ? a(m, k) : 0.0f; };
  auto gb = [&](int k, int n) { return k < Kd && n < N ? b(k, n) : 0.0f; };
  // The fragment register of (m, k), (m, k + 1) (k even): one load where the operand offers pair
  // and both elements are in range, else element by element (zeros past M, N, Kd).
  bool a_pairs = false, b_pairs = false, a_ldsm = false, b_ldsm = false;
  if constexpr (requires { a.pair(0, 0); }) a_pairs = a.pairable();
  if constexpr (requires { b.pair(0, 0); }) b_pairs = b.pairable();
  if constexpr (requires { a.ldsm(); }) a_ldsm = a.ldsm();
  if constexpr (requires { b.ldsm(); }) b_ldsm = b.ldsm();
  auto pa = [&](int m, int k) {
    if constexpr (requires { a.pair(m, k); }) {
      if (a_pairs && m < M && k + 1 < Kd) return a.pair(m, k);
    }
    return mma::pack_bf16x2(ga(m, k), ga(m, k + 1));
  };
  auto pb = [&](int k, int n) {
    if constexpr (requires { b.pair(k, n); }) {
      if (b_pairs && n < N && k + 1 < Kd) return b.pair(k, n);
    }
    return mma::pack_bf16x2(gb(k, n), gb(k + 1, n));
  };
  for (int job = warp; job < Mt * Nt; job += nwarps) {  // warp-uniform
    const int m0 = (job / Nt) * 16, n0 = (job % Nt) * 8 * NT;
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    const int k_begin = tri == Tri::kUpper ? m0 : 0;
    const int k_end = tri == Tri::kLower && m0 + 16 < Kd ? m0 + 16 : Kd;
    // Whole-fragment loads (ldmatrix) where this job's blocks lie inside M, N (warp-uniform).
    bool a_full = false, b_full = false;
    if constexpr (requires { a.frag_a(0, 0, 0, std::declval<uint32_t(&)[4]>()); })
      a_full = a_ldsm && m0 + 16 <= M;
    if constexpr (requires { b.frag_b2(0, 0, 0, std::declval<uint32_t(&)[4]>()); })
      b_full = b_ldsm && n0 + 8 * NT <= N;
    for (int k0 = k_begin; k0 < k_end; k0 += 16) {  // warp-uniform
      const int ka = k0 + 2 * t;
      const bool k_full = k0 + 16 <= Kd;
      uint32_t af[4];
      bool a_done = false;
      if constexpr (requires { a.frag_a(0, 0, 0, af); }) {
        if (a_full && k_full) {
          a.frag_a(m0, k0, lane, af);
          a_done = true;
        }
      }
      if (!a_done) {
        af[0] = pa(m0 + g, ka);
        af[1] = pa(m0 + g + 8, ka);
        af[2] = pa(m0 + g, ka + 8);
        af[3] = pa(m0 + g + 8, ka + 8);
      }
      // One B fragment per n-tile (the pairs fill them tile by tile); an ldmatrix pair is split
      // (the pair layout bf[NT / 2][4] with tile::mma_x2 changed the kernels' machine code).
      uint32_t bf[NT][2];
      bool b_done = false;
      if constexpr (requires { b.frag_b2(0, 0, 0, std::declval<uint32_t(&)[4]>()); }) {
        if (b_full && k_full) {
#pragma unroll
          for (int j = 0; j < NT; j += 2) {
            uint32_t r[4];
            b.frag_b2(k0, n0 + 8 * j, lane, r);
            bf[j][0] = r[0];
            bf[j][1] = r[1];
            bf[j + 1][0] = r[2];
            bf[j + 1][1] = r[3];
          }
          b_done = true;
        }
      }
      if (!b_done) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int nb = n0 + 8 * j + g;
          bf[j][0] = pb(ka, nb);
          bf[j][1] = pb(ka + 8, nb);
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) mma::mma_bf16_16816(acc[j], af, bf[j]);
    }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // The C fragment walk (tile::c_row / c_col), summed in this order: m0 + tile::c_row
        // reassociates the adds and changes the kernels' machine code.
        const int m = m0 + g + (i >= 2 ? 8 : 0), n = n0 + 8 * j + 2 * t + (i % 2);
        if constexpr (std::is_invocable_v<F&, int, int, float, float>) {
          // (i, i + 1) are columns n, n + 1 of one row: one call for both where both exist.
          if (i % 2 == 0 && m < M && n + 1 < N) {
            f(m, n, acc[j][i], acc[j][i + 1]);
            continue;
          }
          if (i % 2 == 1 && m < M && n < N) continue;  // done with its left neighbour
        }
        if (m < M && n < N) f(m, n, acc[j][i]);
      }
  }
}

template <Tri tri, class A, class Bm, class F>
__device__ __forceinline__ void block_mma(int M, int N, int Kd, A a, Bm b, F f) {
  const int jobs4 = ((M + 15) / 16) * ((N + 31) / 32);
  if (jobs4 >= int(blockDim.x) / 32)
    block_mma_nt<4, tri>(M, N, Kd, a, b, f);
  else
    block_mma_nt<2, tri>(M, N, Kd, a, b, f);
}

// Tensor cores for bf16 storage, exact f32 SIMT for f32 storage (which multiplies every k: the
// triangular hint only skips work on the tensor-core path).
template <class T, Tri tri = Tri::kFull, class A, class Bm, class F>
__device__ __forceinline__ void block_mm_t(int M, int N, int Kd, A a, Bm b, F f) {
  if constexpr (std::is_same_v<T, float>)
    block_mm(M, N, Kd, a, b, f);
  else
    block_mma<tri>(M, N, Kd, a, b, f);
}

}  // namespace amor::cuda::gdn
