// The tile layer of the tensor-core kernels (attention, gated delta, SSD): bf16 operand tiles in
// shared memory, the warp fragments read from them, the element walk of the f32 accumulators, and
// the block-wide copies global -> shared that fill the tiles. Built on kernels/core/mma.cuh (the
// instructions mma.sync / ldmatrix / stmatrix / cp.async, whose fragment layouts it documents and
// this file does not repeat). Included by .cu files only; under the CPU emulator every helper runs
// on mma.cuh's emulated instructions.
//
// Why a layer: each op had its own copy of these pieces (the same ldmatrix addressing written
// three ways); one copy keeps them consistent and documented once. Every helper is the code the
// ops had inlined before (same instructions, same operands, same order): moving a kernel onto it
// changes no arithmetic.
//
// Tiles. A tile X is a row-major matrix in shared memory with a row stride `ld` (elements). For
// ldmatrix, bf16 rows must start 16-byte aligned (ld a multiple of 8); padded_ld adds 8 elements
// to a width that is a multiple of 16 so that the 8 rows one 8 x 8 matrix reads fall in 8
// different bank groups. Strides are a template type (int or int64_t, compile-time constants
// where the caller has them): the address arithmetic keeps the caller's width.
//
// Fragments (one ldmatrix.x4 each; lane l = threadIdx.x % 32 supplies the row address shown):
//   frag_a         A[m][k] = X[m][k]: the A fragment at (m0, k0)      X[m0 + l % 16][k0 + 8 (l / 16)]
//   frag_a_trans   A[m][k] = X[k][m] (.trans)                         X[k0 + l % 8 + 8 (l / 16)]
//                                                                      [m0 + 8 ((l / 8) % 2)]
//   frag_b2        B[k][n] = X[n][k]: B fragments of the two n-tiles  X[n0 + l % 8 + 8 (l / 16)]
//                  n0 and n0 + 8 (X = K for S = Q K^T)                 [k0 + 8 ((l / 8) % 2)]
//   frag_b2_trans  B[k][n] = X[k][n] (.trans; X = V for O = P V)      X[k0 + l % 8 + 8 ((l / 8) % 2)]
//                                                                      [n0 + 8 (l / 16)]
// The B loads fill b[4]: b[0], b[1] are the B fragment of n-tile n0, b[2], b[3] of n-tile n0 + 8;
// mma_x2 runs the two MMAs of such a pair. Two n-tiles per load because ldmatrix.x4 reads four
// 8 x 8 matrices: the A fragment is four, a B fragment two. store_a_trans is frag_a_trans's
// inverse (stmatrix.x4.trans, the same addresses): an A fragment of X^T written as X. Each load
// also takes a LaneParts (lane_parts(l): l % 8, (l / 8) & 1, l / 16, computed once) instead of
// the lane: the same addresses summed as SSD summed them.
//
// Summation order. The addresses are integer sums; ptxas schedules (and sometimes allocates)
// differently when their order changes, and the ops summed them differently. To keep every
// kernel's machine code, the helpers keep the order of the op that had the form first
// (attention's for the lane form, SSD's for LaneParts); notes at frag_b2_trans and in the ops
// say where a kernel's code moved or its own form stayed.
//
// Accumulators: a 16 x 8 output tile is a C fragment float c[4]; c_row / c_col give the tile row
// and column of element e for this lane (the walk every epilogue does), a_from_c reuses a pair of
// C fragments as the A fragment of the next product (mma.cuh's register reuse) and store_c_rows
// writes a warp's 16 x 8NT accumulator as bf16 rows.
//
// Copies: for_pieces deals the pieces (16 bytes: one cp.async or vector load) of a tile
// round-robin over the block's threads; the op's body issues each piece (its own row sources and
// zero-fill rule), then commits and waits (mma::cp_async_commit / cp_async_wait, a barrier).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cast/cuda_device.cuh"
#include "kernels/core/mma.cuh"

namespace amor::cuda::tile {

// Row stride (elements) of a shared tile of `cols` columns of E, chosen for the fragment reads
// (lane (g, t) reads rows g and columns 2t, 2t+1, or the transpose):
//  - bf16: cols + 8 (cols a multiple of 16 makes the stride 4 mod 8 words, so rows g = 0..7 start
//    in 8 different 4-bank groups: conflict-free both ways, ldmatrix included), rows stay 16-byte
//    aligned;
//  - f32: cols + 4 (16-byte rows; column reads 2t, 2t+1 at rows g hit banks 8t + g: conflict-free;
//    row reads at most 2-way).
template <class E>
__host__ __device__ constexpr int64_t padded_ld(int64_t cols) {
  return cols + (sizeof(E) == 2 ? 8 : 4);
}

// Whether a tile of E at x with stride ld can be read by ldmatrix: bf16 with 16-byte aligned rows.
template <class E, class Ld>
__device__ __forceinline__ bool ldsm_ok(const E* x, Ld ld) {
  return sizeof(E) == 2 && ld % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

// ---- fragments from shared memory (warp-collective; see the table above). E is bf16 for every
// load that runs; the element type is a parameter so that code generic over a tile's dtype (gated
// delta's operands: f32 tiles take another path at run time) compiles.

template <class E, class Ld>
__device__ __forceinline__ void frag_a(uint32_t (&a)[4], const E* x, Ld ld, int m0, int k0,
                                       int lane) {
  mma::ldmatrix_x4(a, x + (m0 + lane % 16) * ld + k0 + (lane / 16) * 8);
}
template <class E, class Ld>
__device__ __forceinline__ void frag_a_trans(uint32_t (&a)[4], const E* x, Ld ld, int m0,
                                             int k0, int lane) {
  const int i = lane / 8;
  mma::ldmatrix_x4_trans(a, x + (k0 + (i / 2) * 8 + lane % 8) * ld + m0 + (i % 2) * 8);
}
template <class E, class Ld>
__device__ __forceinline__ void frag_b2(uint32_t (&b)[4], const E* x, Ld ld, int k0, int n0,
                                        int lane) {
  mma::ldmatrix_x4(b, x + (n0 + lane % 8 + (lane / 16) * 8) * ld + k0 + ((lane / 8) % 2) * 8);
}
// (The row is summed k0 + l % 8 + 8 ((l / 8) % 2), as attention had it. Gated delta's RowB summed
// k0 + 8 ((l / 8) % 2) + l % 8, the same addresses; each order reschedules the other op's kernels
// (attention's dkdv; gdn_prepare_reg_kernel: same registers, a few instructions moved), and
// attention's order is kept.)
template <class E, class Ld>
__device__ __forceinline__ void frag_b2_trans(uint32_t (&b)[4], const E* x, Ld ld, int k0,
                                              int n0, int lane) {
  mma::ldmatrix_x4_trans(b, x + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * ld + n0 + (lane / 16) * 8);
}

// The same loads from a lane's parts computed once by the caller (lane_parts: l % 8, (l / 8) & 1,
// l / 16), each address summed as SSD's kernels had it (their machine code depends on the order).
struct LaneParts {
  int r, q1, q2;
};
__device__ __forceinline__ LaneParts lane_parts(int lane) {
  return {lane % 8, (lane / 8) & 1, lane / 16};
}
template <class E, class Ld>
__device__ __forceinline__ void frag_a(uint32_t (&a)[4], const E* x, Ld ld, int m0, int k0,
                                       const LaneParts& p) {
  mma::ldmatrix_x4(a, x + (m0 + p.r + 8 * p.q1) * ld + k0 + 8 * p.q2);
}
template <class E, class Ld>
__device__ __forceinline__ void frag_a_trans(uint32_t (&a)[4], const E* x, Ld ld, int m0,
                                             int k0, const LaneParts& p) {
  mma::ldmatrix_x4_trans(a, x + (k0 + p.r + 8 * p.q2) * ld + m0 + 8 * p.q1);
}
template <class E, class Ld>
__device__ __forceinline__ void frag_b2(uint32_t (&b)[4], const E* x, Ld ld, int k0, int n0,
                                        const LaneParts& p) {
  mma::ldmatrix_x4(b, x + (n0 + p.r + 8 * p.q2) * ld + k0 + 8 * p.q1);
}
template <class E, class Ld>
__device__ __forceinline__ void frag_b2_trans(uint32_t (&b)[4], const E* x, Ld ld, int k0,
                                              int n0, const LaneParts& p) {
  mma::ldmatrix_x4_trans(b, x + (k0 + p.r + 8 * p.q1) * ld + n0 + 8 * p.q2);
}

// Stores the A fragment a of A[m][k] = X[k][m] at (m0, k0) to X (what frag_a_trans would read
// back): the packing of a C fragment pair of X^T (a_from_c) written as X without a transpose in
// registers.
template <class E, class Ld>
__device__ __forceinline__ void store_a_trans(E* x, Ld ld, int m0, int k0, int lane,
                                              const uint32_t (&a)[4]) {
  const int i = lane / 8;
  mma::stmatrix_x4_trans(x + (k0 + (i / 2) * 8 + lane % 8) * ld + m0 + (i % 2) * 8, a);
}

// c0 += A B0, c1 += A B1 for the n-tile pair b of a frag_b2 / frag_b2_trans load.
__device__ __forceinline__ void mma_x2(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
  mma::mma_bf16_16816(c0, a, b0);
  mma::mma_bf16_16816(c1, a, b1);
}

// ---- accumulators

// Row and column, inside its 16 x 8 tile, of element e (0..3) of this lane's C fragment.
__device__ __forceinline__ int c_row(int lane, int e) { return lane / 4 + (e >= 2 ? 8 : 0); }
__device__ __forceinline__ int c_col(int lane, int e) { return 2 * (lane % 4) + (e % 2); }

// The A fragment of k-step kk (columns 16 kk ..) of a 16 x 8N accumulator c[N][4], rounded to
// bf16: the output of one product as the A operand of the next without shared memory.
template <int N>
__device__ __forceinline__ void a_from_c(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = mma::pack_bf16x2(c[2 * kk][0], c[2 * kk][1]);
  a[1] = mma::pack_bf16x2(c[2 * kk][2], c[2 * kk][3]);
  a[2] = mma::pack_bf16x2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = mma::pack_bf16x2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Stores a warp's 16 x 8N accumulator c[N][4] as bf16 pairs (4-byte stores): row c_row(lane, 0)
// times mul_a to dst_a and row c_row(lane, 2) times mul_b to dst_b (the rows' first elements;
// null where the row is not stored).
template <int N>
__device__ __forceinline__ void store_c_rows(const float (&c)[N][4], int lane, float mul_a,
                                             float mul_b, bf16_t* dst_a, bf16_t* dst_b) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int col = j * 8 + c_col(lane, 0);
    if (dst_a) {
      *reinterpret_cast<uint32_t*>(dst_a + col) =
          mma::pack_bf16x2(c[j][0] * mul_a, c[j][1] * mul_a);
    }
    if (dst_b) {
      *reinterpret_cast<uint32_t*>(dst_b + col) =
          mma::pack_bf16x2(c[j][2] * mul_b, c[j][3] * mul_b);
    }
  }
}

// ---- copies global -> shared (block-wide, not collective)

// f(r, p) for this thread's pieces of a rows x per grid: index i = r per + p runs from threadIdx.x
// in steps of kStride (0: blockDim.x). Consecutive threads take consecutive pieces of a row:
// coalesced global reads. kPer > 0: per is that compile-time constant (the division and remainder
// fold to shifts), else the runtime `per`. (The two forms, i % per and i - (i / per) per, and
// blockDim.x read where the loop steps, are the ones the kernels had: ptxas allocates their
// registers differently otherwise.)
template <int kStride, int kPer = 0, class F>
__device__ __forceinline__ void for_pieces(int rows, int per, F&& f) {
  if constexpr (kPer > 0) {
    for (int i = int(threadIdx.x); i < rows * kPer; i += kStride > 0 ? kStride : int(blockDim.x))
      f(i / kPer, i % kPer);
  } else {
    for (int i = int(threadIdx.x); i < rows * per; i += kStride > 0 ? kStride : int(blockDim.x)) {
      const int r = i / per;
      f(r, i - r * per);
    }
  }
}

}  // namespace amor::cuda::tile
