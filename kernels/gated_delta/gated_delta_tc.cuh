// Block-wide matrix products of the gated delta rule's chunk kernels on tensor cores (included by
// the .cu files only, after gated_delta_cuda_common.cuh).
//
// block_mma(M, N, Kd, a, b, f) has block_mm's contract: for every (m, n) of [0,M) x [0,N) it calls
// f(m, n, sum_{k<Kd} a(m,k) b(k,n)), each output by one thread that depends only on M and N (so
// calls accumulating into one array need no barrier between them). The operands are read through
// the same accessors (f32 values in shared memory, often scaled on the fly: diag(beta e) K, P^T,
// a concatenation [X | Y] of two operands along k), rounded to bf16 (nearest even) and multiplied
// by warp mma.sync m16n8k16 (kernels/core/mma.cuh) with f32 accumulation:
//   - a warp takes a job of 16 rows x 8*NT columns (NT n8-tiles sharing one A fragment), jobs are
//     dealt round-robin over the block's warps; NT = 4 when that still gives every warp a job,
//     else 2 (the state-pass tiles are only 64 x 32);
//   - k advances in steps of 16; indices past M, N or Kd read as zeros (the accessors are never
//     called there), so any M, N, Kd work (tails, K = 8, concatenations at any k).
// Fragments are gathered element by element through the accessors (no ldmatrix): the operand
// tiles are f32 and often scaled, and the gather's 24 shared loads per 4 MMAs (16 x 32 x 16
// multiply-adds) replace the SIMT path's 256 FMAs and 128 loads per lane.
//
// A triangular A operand (Tri::kLower / kUpper, promised by the caller) skips the k steps that
// would only multiply its zeros: 10 of 16 steps for a 64 x 64 triangle.
//
// Every call is warp-collective (the MMAs): all threads of the block must reach it together,
// as for block_mm's barrier-free use in the kernels.
//
// block_mm_t<T> picks the product per storage dtype: tensor cores for bf16 inputs, the exact
// SIMT block_mm for f32 inputs (the f32 path's parity stays <= 1e-5).
#pragma once
#include <type_traits>

#include "kernels/core/mma.cuh"
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"

namespace amor::cuda::gdn {

// Which zeros of the A operand the caller promises (the k steps of a job that would only multiply
// them are skipped): none, lower triangular (a(m, k) = 0 for k > m: Tm, P, dP) or upper
// triangular (a(m, k) = 0 for k < m: their transposes).
enum class Tri { kFull, kLower, kUpper };

template <int NT, Tri tri, class A, class Bm, class F>
__device__ __forceinline__ void block_mma_nt(int M, int N, int Kd, A a, Bm b, F f) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int nwarps = int(blockDim.x) / 32;
  const int g = lane / 4, t = lane % 4;
  const int Mt = (M + 15) / 16, Nt = (N + 8 * NT - 1) / (8 * NT);
  auto ga = [&](int m, int k) { return m < M && k < Kd ? a(m, k) : 0.0f; };
  auto gb = [&](int k, int n) { return k < Kd && n < N ? b(k, n) : 0.0f; };
  for (int job = warp; job < Mt * Nt; job += nwarps) {  // warp-uniform
    const int m0 = (job / Nt) * 16, n0 = (job % Nt) * 8 * NT;
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    const int k_begin = tri == Tri::kUpper ? m0 : 0;
    const int k_end = tri == Tri::kLower && m0 + 16 < Kd ? m0 + 16 : Kd;
    for (int k0 = k_begin; k0 < k_end; k0 += 16) {  // warp-uniform
      const int ka = k0 + 2 * t;
      uint32_t af[4];
      af[0] = mma::pack_bf16x2(ga(m0 + g, ka), ga(m0 + g, ka + 1));
      af[1] = mma::pack_bf16x2(ga(m0 + g + 8, ka), ga(m0 + g + 8, ka + 1));
      af[2] = mma::pack_bf16x2(ga(m0 + g, ka + 8), ga(m0 + g, ka + 9));
      af[3] = mma::pack_bf16x2(ga(m0 + g + 8, ka + 8), ga(m0 + g + 8, ka + 9));
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int nb = n0 + 8 * j + g;
        uint32_t bf[2];
        bf[0] = mma::pack_bf16x2(gb(ka, nb), gb(ka + 1, nb));
        bf[1] = mma::pack_bf16x2(gb(ka + 8, nb), gb(ka + 9, nb));
        mma::mma_bf16_16816(acc[j], af, bf);
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = m0 + g + (i >= 2 ? 8 : 0), n = n0 + 8 * j + 2 * t + (i % 2);
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
