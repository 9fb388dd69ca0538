// Gated delta rule forward on the GPU: the chunked WY/UT algorithm of gated_delta_chunked_ref.h
// (read its comment for the derivation). Per head, time is cut into chunks of L <= 64 steps; in a
// chunk with rows r = 0..n-1 and state S [K,V] at its start:
//   gam_r = g_0 + ... + g_r (f32),  e_r = exp(gam_r),  D_rj = exp(gam_r - gam_j)
//   A_rj = beta_r (k_r . k_j) D_rj (j < r),   Tm = (I + A)^-1 (blocked forward substitution)
//   W = Tm diag(beta e) K,   U = Tm diag(beta) V,   Vn = U - W S
//   O = scale diag(e) Q S + P Vn,   P_rj = scale (q_r . k_j) D_rj (j <= r)
//   S' = e_{n-1} S + sum_j D_{n-1,j} k_j Vn_j^T
// Default for bf16 at chunk 64, K 64 or 128, V a multiple of 64 (fused_fwd_ok): the fused
// forward of gated_delta_fwd_fused_cuda.cu, two kernels (the prepare below in a Tm-only form, then
// one sequential pass that computes Vn, the output and the state update per chunk without W, U,
// S or Vn in memory). A forward that keeps the backward's intermediates (`saved`) runs the
// prepare below for gam, W and Tm and the fused pass for o, the final state (the same bits as
// without `saved`), S and Vn; the backward's recomputation (launch_intermediates) the same
// without o (AMOR_GDN_FWD_KEEP=state: the full prepare and the state pass below for the
// intermediates, the fused pass for o). AMOR_GDN_FWD=split: the three kernels below everywhere.
// Three kernels (as flash-linear-attention structures chunk_gated_delta_rule_fwd):
//  1. gdn_prepare_kernel, one block per (chunk, head, batch), all chunks in parallel: gam, A, Tm,
//     W, U from the chunk's k, v, g, beta (nothing depends on the state). Writes gam [BH,T], W
//     [BH,T,K], U [BH,T,V] to the scratch, and Tm [BH,T,L] when the backward asks. For bf16
//     with K, V and the chunk multiples of 16 gdn_prepare_reg_kernel replaces it by default: a
//     warp per 16 rows, A, the off-diagonal blocks of the solve (bf16 hi + lo split products),
//     W and U in MMA fragments, four barriers after the copies (AMOR_GDN_PREPARE=tile keeps
//     this one).
//  2. gdn_state_fwd_kernel, one block per (32 columns of V, head, batch), sequential over the
//     chunks: the columns of S are independent (every product above mixes rows of S, never
//     columns), so V is split across blocks. The block keeps its S [K,32] slice in shared memory
//     (f32), stores it as the chunk's start state ([BH,NC,K,V]), writes Vn, and advances S. This
//     pass is the only sequential part; chunk c + 1's inputs are copied in (cp.async) while chunk
//     c is computed, so a chunk step is two [n,K]x[K,32] products and three barriers, no memory
//     latency. For bf16 (K 32, 48, 64 or 128, V a multiple of 16) gdn_state_fwd_reg_kernel
//     replaces it by default: a warp per 16 columns of V with its state slice in registers, one
//     barrier per chunk (AMOR_GDN_VARIANT=tile: the shared-memory pass, for comparison;
//     =fused: for K <= 64 the register pass also computes the output, step 3, so S and Vn never
//     reach memory, but its registers, 240 a thread, leave room for 1.45 waves of blocks where
//     the unfused pass, 168, fits one: 798 against 587 us at B8 T2K H24, 2026-12-01 session 3).
//  3. The output, all chunks in parallel: for bf16 at chunk 64, K 64 or 128 (the default)
//     gdn_output_tc_kernel (gated_delta_output_tc_cuda.cu: P and O in register fragments, a warp
//     per 16 rows); else gdn_output_kernel, one block per (chunk, head, batch): P from q, k, gam,
//     then O in 32-column tiles of V from the chunk's start state and Vn (the next tile's copies
//     in flight while one is multiplied; AMOR_GDN_VARIANT=reg keeps it after the register pass).
// Memory traffic: q, k, v read twice or three times (prepare, state pass, output); the scratch
// arrays that later kernels only multiply (W, Vn, the chunk states) are stored in the input dtype
// (bf16: the rounding their tensor-core use applies anyway), U and gam in f32; one K x V state per
// chunk written and read (for T = 2K, K = 64, V = 128, bf16: 16 KB per chunk, the order of the
// chunk's activations).
// Tiling: every tile is copied global -> shared with 16-byte cp.async (tile_load), q, k, v and the
// bf16 scratch tiles stay bf16 in shared memory (rows padded by 16 bytes: conflict-free ldmatrix
// and fragment loads), f32 tiles are padded by 4 floats. The products (K K^T, Q K^T, Tm K~,
// Tm V~, W S, the state update K~^T Vn, and O = [Q~ | P] [S; Vn] as one product; K~, V~, Q~ the
// scaled tiles, scaled once in place) go through block_mm_t<T> (gated_delta_tc.cuh): for bf16
// inputs warp mma.sync m16n8k16 with ldmatrix fragments and f32 accumulation, for f32 inputs the
// exact SIMT block_mm (4 x 4 register tiles). The cumulative sums, exps and the triangular solve
// (ut_inverse: 16 x 16 diagonal blocks by substitution, then 3 block rows with two barriers each,
// instead of one barrier per row) stay f32 SIMT; the carried state S stays f32 in shared memory
// (only its operand copy is rounded). Occupancy (bf16, K 64, V 128, L 64; H200: 228 KB shared
// memory, 64K registers per SM): prepare and the state pass three blocks per SM (65 and 60 KB,
// <= 80 registers), output three (48 KB, 80 registers).
#include <type_traits>
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_fwd_fused.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda {
namespace gdn {
namespace {

// Tm = (I + A)^-1 for A strictly lower triangular (rows and columns < n of [*, L] tiles; Tm holds
// the identity on entry), in f32, in 16 x 16 blocks instead of 63 row steps with a barrier each:
//  1. each diagonal block Tm_ii = (I + A_ii)^-1, one thread per column: forward substitution
//     x_r = -sum_{j<=m<r} A_rm x_m down its column (x_j = 1), no barriers;
//  2. block rows i = 1, 2, ... in order (block row i needs the finished block rows above):
//     (I + A_ii) Tm_ij + sum_{j<=b<i} A_ib Tm_bj = 0, so Tm_ij = -Tm_ii X_ij with
//     X_ij = sum_{b<i} A_ib Tm_bj (Tm_bj = 0 for b < j), two barriers per block row.
__device__ __forceinline__ void ut_inverse(const float* A, float* Tm, float* X, int n, int L) {
  constexpr int kB = 16;
  const int nb = (n + kB - 1) / kB;
  for (int col = threadIdx.x; col < nb * kB; col += blockDim.x) {
    const int j = col, end = (j / kB + 1) * kB < n ? (j / kB + 1) * kB : n;
    if (j >= n) continue;
    for (int r = j + 1; r < end; ++r) {
      float acc = A[r * L + j];  // x_j = 1
      for (int m = j + 1; m < r; ++m) acc += A[r * L + m] * Tm[m * L + j];
      Tm[r * L + j] = -acc;
    }
  }
  // Unrolled: with a compile-time chunk (Shape) r0 is a constant in each copy, so the index
  // divisions below are by constants and the term loops have fixed trip counts.
#pragma unroll
  for (int bi = 1; bi < nb; ++bi) {
    const int r0 = bi * kB, rows = n - r0 < kB ? n - r0 : kB;
    __syncthreads();  // block rows above (and the diagonal blocks) final; X no longer read
    if (L % 4 == 0) {
      // Thread (g, c), 4 r0 of them: rows g, g + 4, g + 8, g + 12 of column c, so one Tm (or X)
      // load feeds four accumulators and one 16-byte load brings four A (or Tm) columns. Every
      // term over m < r0 is taken (Tm_mc = 0 for m < c: exact zeros in the same ascending
      // order, so the sums equal the triangular loop's): a fixed trip count without per-term
      // index arithmetic. ncu (2026-12-01): the triangular loops were 42% of prepare's issued
      // instructions.
      const int idx = int(threadIdx.x), g = idx / r0, c = idx % r0;
      if (idx < 4 * r0) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int m = 0; m < r0; m += 4) {
          const float t0 = Tm[m * L + c], t1 = Tm[(m + 1) * L + c];
          const float t2 = Tm[(m + 2) * L + c], t3 = Tm[(m + 3) * L + c];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float4 a = *reinterpret_cast<const float4*>(A + (r0 + g + 4 * q) * L + m);
            acc[q] = fmaf(a.w, t3, fmaf(a.z, t2, fmaf(a.y, t1, fmaf(a.x, t0, acc[q]))));
          }
        }
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (g + 4 * q < rows) X[(g + 4 * q) * L + c] = acc[q];
      }
      __syncthreads();
      if (idx < 4 * r0) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int m = 0; m < kB; m += 4) {
          // X rows past `rows` were not written: zeros instead (their Tm coefficients are 0).
          const float x0 = m < rows ? X[m * L + c] : 0.0f;
          const float x1 = m + 1 < rows ? X[(m + 1) * L + c] : 0.0f;
          const float x2 = m + 2 < rows ? X[(m + 2) * L + c] : 0.0f;
          const float x3 = m + 3 < rows ? X[(m + 3) * L + c] : 0.0f;
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float4 t = *reinterpret_cast<const float4*>(Tm + (r0 + g + 4 * q) * L + r0 + m);
            acc[q] = fmaf(t.w, x3, fmaf(t.z, x2, fmaf(t.y, x1, fmaf(t.x, x0, acc[q]))));
          }
        }
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (g + 4 * q < rows) Tm[(r0 + g + 4 * q) * L + c] = -acc[q];
      }
      continue;
    }
    for (int idx = threadIdx.x; idx < rows * r0; idx += blockDim.x) {
      const int r = idx / r0, c = idx % r0;
      float acc = 0.0f;
      for (int m = c; m < r0; ++m) acc += A[(r0 + r) * L + m] * Tm[m * L + c];
      X[r * L + c] = acc;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * r0; idx += blockDim.x) {
      const int r = idx / r0, c = idx % r0;
      float acc = 0.0f;
      for (int m = 0; m <= r; ++m) acc += Tm[(r0 + r) * L + r0 + m] * X[m * L + c];
      Tm[(r0 + r) * L + c] = -acc;
    }
  }
}

// Three blocks per SM (65 KB of shared memory each for bf16; three blocks of 256 threads allow
// 80 registers a thread, which ptxas meets without spills).
template <class T, class Sh>
__global__ void __launch_bounds__(kThreads, 3)
    gdn_prepare_kernel(const T* __restrict__ k, const T* __restrict__ v, const void* g,
                       const void* beta, bool gate_f32, Dims d, float* __restrict__ gam_out,
                       T* __restrict__ W_out, float* __restrict__ U_out, T* __restrict__ Tm_out) {
  extern __shared__ float smem[];
  const ChunkPos p = chunk_pos<Sh>(d);
  Carve carve{smem};
  PrepareSmem<T> s(carve, d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0, ldk = s.ldk, ldv = s.ldv, ldl = s.ldl;

  tile_load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, ldk);
  tile_load_rows(v, d, p.b, p.h, p.t0, n, V, 0, int(V), s.v, ldv);
  tile_commit();
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const int64_t i = (p.b * d.T + p.t0 + r) * d.H + p.h;
    s.be[r] = load_any(g, i, gate_f32);  // the raw g until the cumulative sum below
    s.beta[r] = load_any(beta, i, gate_f32);
  }
  if (L % 4 == 0 && ldl % 4 == 0) {
    // The identity by 16-byte stores (ncu: the element loop was 7% of the kernel's instructions).
    const int q4 = L / 4;
    for (int idx = int(threadIdx.x); idx < L * q4; idx += int(blockDim.x)) {
      const int r = idx / q4, c = (idx - r * q4) * 4;
      *reinterpret_cast<float4*>(s.Tm + r * ldl + c) = make_float4(
          r == c ? 1.0f : 0.0f, r == c + 1 ? 1.0f : 0.0f, r == c + 2 ? 1.0f : 0.0f,
          r == c + 3 ? 1.0f : 0.0f);
    }
  } else {
    for (int idx = threadIdx.x; idx < L * L; idx += blockDim.x)
      s.Tm[(idx / L) * ldl + idx % L] = (idx / L == idx % L) ? 1.0f : 0.0f;
  }
  tile_wait();
  __syncthreads();
  // The chunk's cumulative log decay: row r sums g_0 .. g_r in order (the sequential sum's
  // rounding), all rows at once.
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float acc = 0.0f;
    for (int m = 0; m <= r; ++m) acc += s.be[m];
    s.gam[r] = acc;
    gam_out[row0 + r] = acc;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += blockDim.x) s.be[r] = s.beta[r] * exp_t<T>(s.gam[r]);
  // A_rj = beta_r (k_r . k_j) D_rj, strictly lower.
  block_mm_t<T>(n, n, int(K), RowA<T>{s.k, ldk}, ColB<T>{s.k, ldk}, [&](int r, int j, float kk) {
    s.A[r * ldl + j] = j < r ? s.beta[r] * kk * exp_t<T>(s.gam[r] - s.gam[j]) : 0.0f;
  });
  __syncthreads();
  // K~ = diag(beta e) K and V~ = diag(beta) V in place (k and v are not read as themselves any
  // more): the B operands of W and U without a multiply per fragment element (for bf16 the same
  // rounding as on the fly). Independent of the solve, which only touches A, Tm and X.
  if (sizeof(T) == 2 && K % 8 == 0 && V % 8 == 0 && ldk % 8 == 0 && ldv % 8 == 0) {
    // bf16: 8 elements per 16-byte shared load and store (the same rounding as one at a time).
    const int pk = int(K) / 8, per = pk + int(V) / 8;
    for (int e = int(threadIdx.x); e < n * per; e += int(blockDim.x)) {
      const int r = e / per, q = e % per;
      T* at = q < pk ? s.k + r * ldk + 8 * q : s.v + r * ldv + 8 * (q - pk);
      const float f = q < pk ? s.be[r] : s.beta[r];
      uint4 x = *reinterpret_cast<const uint4*>(at);
      x.x = mma::scale_bf16x2(x.x, f, f);
      x.y = mma::scale_bf16x2(x.y, f, f);
      x.z = mma::scale_bf16x2(x.z, f, f);
      x.w = mma::scale_bf16x2(x.w, f, f);
      *reinterpret_cast<uint4*>(at) = x;
    }
  } else {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int r = int(threadIdx.x) / 32; r < n; r += nw) {
      for (int i = lane; i < K; i += 32)
        s.k[r * ldk + i] = from_f32<T>(s.be[r] * to_f32(s.k[r * ldk + i]));
      for (int c = lane; c < V; c += 32)
        s.v[r * ldv + c] = from_f32<T>(s.beta[r] * to_f32(s.v[r * ldv + c]));
    }
  }
  ut_inverse(s.A, s.Tm, s.X, n, int(ldl));
  __syncthreads();
  // W = Tm K~ and U = Tm V~ (Tm is zero above the diagonal).
  auto products = [&](auto tm) {
    block_mm_t<T, Tri::kLower>(
        n, int(K), n, tm, RowB<T>{s.k, ldk},
        Epi{[&](int r, int i, float w) { W_out[(row0 + r) * K + i] = from_f32<T>(w); },
            [&](int r, int i, float w0, float w1) { store2(W_out, (row0 + r) * K + i, w0, w1); }});
    block_mm_t<T, Tri::kLower>(
        n, int(V), n, tm, RowB<T>{s.v, ldv},
        Epi{[&](int r, int c, float u) { U_out[(row0 + r) * V + c] = u; },
            [&](int r, int c, float u0, float u1) { store2(U_out, (row0 + r) * V + c, u0, u1); }});
  };
  if constexpr (sizeof(T) == 2) {
    if (L % 8 == 0 && ldl % 2 == 0) {
      // bf16: Tm rounded to a bf16 tile once (in A's place: A is no longer read; L rows of L + 8
      // bf16 fit in its L rows of L + 4 floats), so the products take whole A fragments by
      // ldmatrix instead of rounding f32 pairs per fragment (ncu: those conversions were 15% of
      // the kernel's instructions and 29% of its stalls). The same bf16 values, so the same
      // products.
      bf16_t* const tmb = reinterpret_cast<bf16_t*>(s.A);
      const int64_t ldb = tile::padded_ld<bf16_t>(L);
      const int q2 = L / 2;
      for (int idx = int(threadIdx.x); idx < n * q2; idx += int(blockDim.x)) {
        const int r = idx / q2, c = (idx - r * q2) * 2;
        const float2 x = *reinterpret_cast<const float2*>(s.Tm + r * ldl + c);
        *reinterpret_cast<uint32_t*>(tmb + r * ldb + c) = mma::pack_bf16x2(x.x, x.y);
      }
      __syncthreads();
      products(RowA<bf16_t>{tmb, ldb});
      if (Tm_out) {
        const int q8 = L / 8;
        for (int idx = int(threadIdx.x); idx < n * q8; idx += int(blockDim.x)) {
          const int r = idx / q8, c = (idx - r * q8) * 8;
          *reinterpret_cast<uint4*>(Tm_out + (row0 + r) * L + c) =
              *reinterpret_cast<const uint4*>(tmb + r * ldb + c);
        }
      }
      return;
    }
  }
  products(RowA<float>{s.Tm, ldl});
  if (Tm_out) {
    for (int idx = threadIdx.x; idx < n * L; idx += blockDim.x)
      Tm_out[row0 * L + idx] = from_f32<T>(s.Tm[(idx / L) * ldl + idx % L]);
  }
}

// gdn_prepare_kernel with the products in MMA fragments (bf16; K, V multiples of 16; chunk L a
// multiple of 16, <= 64; AMOR_GDN_PREPARE=tile keeps the kernel above). Warp i of kPrepWarps owns
// the chunk's rows B_i = [16 i, 16 i + 16) and computes every row-indexed result of them; R = L
// rows, zero-filled past the chunk (k, g and beta zero there: A's rows and Tm's rows past n are
// those of I, never stored). Per chunk:
//   gam_r = g_0 + ... + g_r (f32, in order: threads r < R; as the kernel above), be_r = beta_r e_r
//   A_B   = (K_B K^T) .* beta_r D_rj (j < r, else 0)   A = K_B (ldmatrix), B = K^T (ldmatrix);
//             column blocks jb <= i only; C fragments, f32, kept in registers to the end of the
//             solve: a[jb] (n8 tiles 2 jb, 2 jb + 1)
//   Tm_ii = (I + A_ii)^-1: A_ii -> the warp's f32 scratch, lanes 0..15 one column each by
//             forward substitution (the kernel above's step 1: the same f32 values), then
//             Tm_ii -> hi = bf16(Tm_ii), lo = bf16(Tm_ii - hi) (two bf16 tiles [R, R]); blocks
//             above the diagonal zero
//   K~ = diag(be) K, V~ = diag(beta) V in place, each warp its rows (scale_bf16x2: the same
//             rounding as the kernel above)
//   by diagonal offset l = 1, 2, 3 (warps i >= l, j = i - l; the blocks it reads are at offsets
//   < l: one barrier per level):
//     X_ij  = sum_{j <= b < i} A_ib Tm_bj          A = A_ib (its C fragments split hi + lo),
//             B = Tm_bj (hi, lo tiles, ldmatrix.trans): hi.hi + hi.lo + lo.hi, f32 sums
//     Tm_ij = -Tm_ii X_ij                          X_ij -> hi, lo into block (i, j) (its own
//             rows; nobody else reads it before the next level), A = Tm_ii (hi, lo), B = X_ij
//             (ldmatrix.trans), three products again; Tm_ij -> hi, lo in block (i, j)
//     ((I + A) Tm = I block row i: Tm_ii^-1 Tm_ij + sum_{j<=b<i} A_ib Tm_bj = 0.) The split
//     products carry ~16 bits of each operand (relative error ~2^-16 against the f32 solve),
//     far below the bf16 rounding of Tm that every later use applies.
//   W_B = Tm_B K~ (bf16 out), U_B = Tm_B V~ (f32 out), in passes of <= 64 columns (one [16, 64]
//             accumulator): A = hi tile rows B (ldmatrix, k blocks <= i: Tm is lower), B = K~, V~
//             (ldmatrix.trans); stored from the C fragments (4- and 8-byte pairs)
//   Tm_out (when the backward keeps it) = the hi tile's rows B, the bf16 Tm the products used.
// Barriers: the copies, gam, the diagonal blocks (scratch read back), the diagonal blocks and
// K~, V~ written, levels 1 and 2. Memory: k, v, g, beta read once; gam, W, U (and Tm) written
// once, straight from the fragments.
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = mma::pack_bf16x2(x0, x1);
  const uint32_t u0 = hi << 16, u1 = hi & 0xffff0000u;
  float h0, h1;
  memcpy(&h0, &u0, 4);
  memcpy(&h1, &u1, 4);
  lo = mma::pack_bf16x2(x0 - h0, x1 - h1);
}

// Two n8 tiles x [2][4] (a 16 x 16 block) into the hi and lo tiles at rows m0.., columns c0..
__device__ __forceinline__ void store_split(const float (&x)[2][4], bf16_t* th, bf16_t* tl,
                                            int64_t ld, int m0, int c0, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t hi, lo;
      split_bf16x2(x[nt][2 * h], x[nt][2 * h + 1], hi, lo);
      const int64_t at = (m0 + g + 8 * h) * ld + c0 + 8 * nt + 2 * t;
      *reinterpret_cast<uint32_t*>(th + at) = hi;
      *reinterpret_cast<uint32_t*>(tl + at) = lo;
    }
}

// x += A B with A and B (two n-tiles, tile::frag_b2's b[4]) given as hi, lo fragment pairs:
// hi.hi + hi.lo + lo.hi.
__device__ __forceinline__ void mma_split(float (&x)[2][4], const uint32_t (&ah)[4],
                                          const uint32_t (&al)[4], const uint32_t (&bh)[4],
                                          const uint32_t (&bl)[4]) {
  tile::mma_x2(x[0], x[1], ah, bh);
  tile::mma_x2(x[0], x[1], ah, bl);
  tile::mma_x2(x[0], x[1], al, bh);
}

// ChunkRows::P's rows m0 .. m0 + 15 (warp mb of gdn_prepare_reg_kernel): the 16 x 16 blocks
// (mb, jb), jb <= mb, of scale (Q K^T) o D, masked j <= r < n, as bf16 pairs into P (row r at
// P + r ld), the blocks above the diagonal zero; rows >= n are not stored. The MMAs, their k order
// and the epilogue's expression are the second fused form's (which computed P itself before),
// so P has the same bits.
__device__ __forceinline__ void p_rows(const bf16_t* qt, const bf16_t* kt, int64_t ldk, int K,
                                       const float* gm, int m0, int mb, int n, float scale,
                                       bf16_t* P, int64_t ld, int lane) {
  constexpr int NB = kPrepWarps;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int jb = 0; jb < NB; ++jb) {
    float p[2][4] = {};
    if (jb <= mb) {
      for (int kk = 0; kk < K / 16; ++kk) {
        uint32_t a[4], b[4];
        tile::frag_a(a, qt, ldk, m0, 16 * kk, lane);
        tile::frag_b2(b, kt, ldk, 16 * kk, 16 * jb, lane);
        tile::mma_x2(p[0], p[1], a, b);
      }
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = m0 + g + 8 * hh;
      const float gr = gm[r];
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2) {
        const int j = 16 * jb + 8 * h2 + 2 * t;
        const float y0 = j <= r && r < n ? scale * p[h2][2 * hh] * exp_t<bf16_t>(gr - gm[j])
                                         : 0.0f;
        const float y1 = j + 1 <= r && r < n
                             ? scale * p[h2][2 * hh + 1] * exp_t<bf16_t>(gr - gm[j + 1])
                             : 0.0f;
        if (r < n) *reinterpret_cast<uint32_t*>(P + r * ld + j) = mma::pack_bf16x2(y0, y1);
      }
    }
  }
}

// kOut (PrepOut, gated_delta_fwd_fused.cuh) picks what the kernel writes: everything (kAll: gam, W,
// U, Tm when Tm_out), gam and Tm only (kTm: the fused forward, gated_delta_fwd_fused_cuda.cu: no v
// tile, no K~, V~, W, U), or gam, W and Tm (kWTm: the fused forward's intermediates for the
// backward: no v tile, no V~, no U). The same instructions up to Tm, and for W, so the same gam,
// Tm and W bits in every form.
// In the Tm-only forms (kTm, kWTm) it also writes the second fused form's ChunkRows when rows.e
// is non-null (gated_delta_fwd_fused.cuh): e_r = exp(gam_r) (the exp that gives be), dl_r =
// exp(gam_{n-1} - gam_r), and with rows.P non-null P = scale (Q K^T) o D masked, bf16, its
// products beside A's (the same B fragments of k; the q tile in the v tile's place) and its
// epilogue the pass's own (same MMAs in the same k order, same exp: the pass's bits).
// Blocks per SM: the full form 4; the Tm-only forms PREP_MINB, whose shared memory (q's tile
// holding lo and the scratch once P is done: PrepareRegSmem's lo_in_v) allows more.
#ifndef PREP_MINB
#define PREP_MINB 6
#endif
template <class Sh, PrepOut kOut>
__global__ void __launch_bounds__(kPrepWarps * 32, kOut == PrepOut::kAll ? 4 : PREP_MINB)
    gdn_prepare_reg_kernel(const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                           const void* g_in, const void* beta_in, bool gate_f32, Dims d,
                           float* __restrict__ gam_out, bf16_t* __restrict__ W_out,
                           float* __restrict__ U_out, bf16_t* __restrict__ Tm_out, ChunkRows rows,
                           const bf16_t* __restrict__ q, float scale) {
  constexpr int NB = kPrepWarps;
  constexpr bool kTmOnly = kOut == PrepOut::kTm, kNoV = kOut != PrepOut::kAll;
  extern __shared__ float smem[];
  const ChunkPos p = chunk_pos<Sh>(d);
  Carve carve{smem};
  const bool with_rows = kNoV && rows.e != nullptr, with_p = with_rows && rows.P != nullptr;
  PrepareRegSmem<bf16_t> s(carve, prepare_layout_dims(d, kNoV, with_p), with_p);
  const int n = p.n, R = int(reg_rows(d));
  const int64_t K = d.K, V = d.V, H = d.H, row0 = p.bh * d.T + p.t0;
  const int64_t x0 = (p.b * d.T + p.t0) * H + p.h;  // token index of row 0 (row r: x0 + r H)
  const int64_t ldk = s.ldk, ldv = s.ldv, ldl = s.ldl;
  tile_load_zfill(k + x0 * K, H * K, n, R, int(K), s.k, ldk);
  if constexpr (!kNoV) tile_load_zfill(v + x0 * V, H * V, n, R, int(V), s.v, ldv);
  if (with_p) tile_load_zfill(q + x0 * K, H * K, n, R, int(K), s.v, ldv);  // q (ldv = ldk)
  tile_commit();
  for (int r = int(threadIdx.x); r < R; r += int(blockDim.x)) {
    s.graw[r] = r < n ? load_any(g_in, x0 + r * H, gate_f32) : 0.0f;
    s.beta[r] = r < n ? load_any(beta_in, x0 + r * H, gate_f32) : 0.0f;
  }
  __syncthreads();
  for (int r = int(threadIdx.x); r < R; r += int(blockDim.x)) {
    // gam_r = graw_0 + ... + graw_r, added in that order (the references' order, so the same
    // bits), from registers: graw read as 16-byte broadcasts ahead of the adds, which are
    // predicated (a loop over shared memory put a dependent load and add per row on every
    // block's path, up to 64 of them).
    float acc = 0.0f;
#pragma unroll
    for (int m4 = 0; m4 < int(kGdnMaxChunk) / 4; ++m4) {
      if (4 * m4 < R) {  // (block-uniform; R is a multiple of 16)
        const float4 gv = reinterpret_cast<const float4*>(s.graw)[m4];
        if (4 * m4 <= r) acc += gv.x;
        if (4 * m4 + 1 <= r) acc += gv.y;
        if (4 * m4 + 2 <= r) acc += gv.z;
        if (4 * m4 + 3 <= r) acc += gv.w;
      }
    }
    s.gam[r] = acc;
    const float er = exp_t<bf16_t>(acc);
    s.be[r] = s.beta[r] * er;
    if (r < n) gam_out[row0 + r] = acc;
    if (with_rows && r < n) rows.e[row0 + r] = er;
  }
  tile_wait();
  __syncthreads();
  if (with_rows) {
    for (int r = int(threadIdx.x); r < n; r += int(blockDim.x))
      rows.dl[row0 + r] = exp_t<bf16_t>(s.gam[n - 1] - s.gam[r]);
  }

  const int lane = int(threadIdx.x) % 32, mb = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  const int m0 = 16 * mb;
  const bool active = m0 < R;  // warp-uniform
  float* const scr = reinterpret_cast<float*>(s.tl) + mb * kPrepDiag;  // A_ii, then Tm_ii
  float a[2 * NB][4];
#pragma unroll
  for (int j = 0; j < 2 * NB; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) a[j][e] = 0.0f;
  if (with_p) {
    // (P first: nothing else is live yet, so its accumulators cost no registers.)
    if (active) p_rows(s.v, s.k, ldk, int(K), s.gam, m0, mb, n, scale, rows.P + row0 * R, R, lane);
    __syncthreads();  // every warp's reads of q done: its tile becomes lo and the scratch
  }
  if (active) {
    // A_B = K_B K^T (column blocks <= mb), then beta_r D_rj below the diagonal.
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t af[4];
      tile::frag_a(af, s.k, ldk, m0, k0, lane);
#pragma unroll
      for (int jb = 0; jb < NB; ++jb) {
        if (jb <= mb) {
          uint32_t b[4];
          tile::frag_b2(b, s.k, ldk, k0, 16 * jb, lane);
          tile::mma_x2(a[2 * jb], a[2 * jb + 1], af, b);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g + 8 * (e / 2), c = 8 * j + 2 * t + e % 2;
        a[j][e] = c < r ? s.beta[r] * a[j][e] * exp_t<bf16_t>(s.gam[r] - s.gam[c]) : 0.0f;
      }
    // A_ii -> scratch [16, 17]; Tm_ii by columns (lane c < 16), as ut_inverse's step 1.
#pragma unroll
    for (int jb = 0; jb < NB; ++jb) {
      if (jb == mb) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            scr[(g + 8 * (e / 2)) * 17 + 8 * nt + 2 * t + e % 2] = a[2 * jb + nt][e];
      }
    }
    mma::sync_warp();
    float* const x = scr + 16 * 17;
    if (lane < 16) {
      // Column j in registers (unrolled: the A loads, broadcasts, run ahead of the chain).
      const int j = lane;
      float xr[16];
#pragma unroll
      for (int r = 0; r < 16; ++r) xr[r] = r == j ? 1.0f : 0.0f;
#pragma unroll
      for (int r = 1; r < 16; ++r) {
        if (r > j) {
          float acc = scr[r * 17 + j];  // x_j = 1
#pragma unroll
          for (int m = 1; m < r; ++m)
            if (m > j) acc += scr[r * 17 + m] * xr[m];
          xr[r] = -acc;
        }
      }
#pragma unroll
      for (int r = 0; r < 16; ++r) x[r * 17 + j] = xr[r];
    }
    mma::sync_warp();
  }
  // Tm_ii in registers as fragments (the scratch is lo's place, overwritten below).
  float tmd[2][4];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      tmd[nt][e] = active ? scr[16 * 17 + (g + 8 * (e / 2)) * 17 + 8 * nt + 2 * t + e % 2] : 0.0f;
  __syncthreads();  // every warp's scratch read
  if (active) {
    store_split(tmd, s.th, s.tl, ldl, m0, m0, lane);
    const float zero[2][4] = {};
    for (int jb = mb + 1; jb < R / 16; ++jb) store_split(zero, s.th, s.tl, ldl, m0, 16 * jb, lane);
    // K~ = diag(be) K, V~ = diag(beta) V, rows B (8 elements per 16-byte load and store).
    const int pk = int(K) / 8, per = pk + (kNoV ? 0 : int(V) / 8);
    for (int e = lane; e < (kTmOnly ? 0 : 16 * per); e += 32) {
      const int r = m0 + e / per, q = e % per;
      bf16_t* at = q < pk ? s.k + r * ldk + 8 * q : s.v + r * ldv + 8 * (q - pk);
      const float f = q < pk ? s.be[r] : s.beta[r];
      uint4 y = *reinterpret_cast<const uint4*>(at);
      y.x = mma::scale_bf16x2(y.x, f, f);
      y.y = mma::scale_bf16x2(y.y, f, f);
      y.z = mma::scale_bf16x2(y.z, f, f);
      y.w = mma::scale_bf16x2(y.w, f, f);
      *reinterpret_cast<uint4*>(at) = y;
    }
  }
  // The off-diagonal blocks by offset l (block (mb, mb - l) at level l).
#pragma unroll
  for (int l = 1; l < NB; ++l) {
    __syncthreads();  // the blocks at offsets < l (and, at l = 1, K~ and V~) final
    const int jb = mb - l;
    if (active && jb >= 0) {
      float xs[2][4] = {};
#pragma unroll
      for (int b = 0; b < NB - 1; ++b) {
        if (b >= jb && b < mb) {
          uint32_t ah[4], al[4], bh[4], bl[4];
          split_bf16x2(a[2 * b][0], a[2 * b][1], ah[0], al[0]);
          split_bf16x2(a[2 * b][2], a[2 * b][3], ah[1], al[1]);
          split_bf16x2(a[2 * b + 1][0], a[2 * b + 1][1], ah[2], al[2]);
          split_bf16x2(a[2 * b + 1][2], a[2 * b + 1][3], ah[3], al[3]);
          tile::frag_b2_trans(bh, s.th, ldl, 16 * b, 16 * jb, lane);
          tile::frag_b2_trans(bl, s.tl, ldl, 16 * b, 16 * jb, lane);
          mma_split(xs, ah, al, bh, bl);
        }
      }
      store_split(xs, s.th, s.tl, ldl, m0, 16 * jb, lane);
      mma::sync_warp();
      uint32_t ah[4], al[4], bh[4], bl[4];
      tile::frag_a(ah, s.th, ldl, m0, m0, lane);
      tile::frag_a(al, s.tl, ldl, m0, m0, lane);
      tile::frag_b2_trans(bh, s.th, ldl, m0, 16 * jb, lane);
      tile::frag_b2_trans(bl, s.tl, ldl, m0, 16 * jb, lane);
      float ys[2][4] = {};
      mma_split(ys, ah, al, bh, bl);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) ys[nt][e] = -ys[nt][e];
      mma::sync_warp();  // X read by every lane
      store_split(ys, s.th, s.tl, ldl, m0, 16 * jb, lane);
    }
  }
  if (!active) return;
  mma::sync_warp();  // the warp's Tm rows (hi) final
  if constexpr (kTmOnly) {
    const int q8 = R / 8;
    for (int e = lane; e < 16 * q8; e += 32) {
      const int r = m0 + e / q8, c = 8 * (e % q8);
      if (r < n)
        *reinterpret_cast<uint4*>(Tm_out + (row0 + r) * R + c) =
            *reinterpret_cast<const uint4*>(s.th + r * ldl + c);
    }
    return;
  }
  // W_B = Tm_B K~, U_B = Tm_B V~ in passes of <= 64 columns.
  const int r0 = m0 + g, r1 = r0 + 8;
  auto product = [&](const bf16_t* bt, int64_t ldb, int64_t c0, int w, auto store) {
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < NB; ++kb) {
      if (kb <= mb) {
        uint32_t af[4];
        tile::frag_a(af, s.th, ldl, m0, 16 * kb, lane);
#pragma unroll
        for (int jp = 0; jp < 4; ++jp) {
          if (16 * jp < w) {
            uint32_t b[4];
            tile::frag_b2_trans(b, bt, ldb, 16 * kb, int(c0) + 16 * jp, lane);
            tile::mma_x2(acc[2 * jp], acc[2 * jp + 1], af, b);
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (8 * j < w) {
        const int64_t c = c0 + 8 * j + 2 * t;
        if (r0 < n) store(r0, c, acc[j][0], acc[j][1]);
        if (r1 < n) store(r1, c, acc[j][2], acc[j][3]);
      }
    }
  };
  for (int64_t c0 = 0; c0 < K; c0 += 64)
    product(s.k, ldk, c0, int(K - c0 < 64 ? K - c0 : 64), [&](int r, int64_t c, float w0, float w1) {
      *reinterpret_cast<uint32_t*>(W_out + (row0 + r) * K + c) = mma::pack_bf16x2(w0, w1);
    });
  for (int64_t c0 = 0; c0 < (kNoV ? 0 : V); c0 += 64)
    product(s.v, ldv, c0, int(V - c0 < 64 ? V - c0 : 64), [&](int r, int64_t c, float u0, float u1) {
      *reinterpret_cast<float2*>(U_out + (row0 + r) * V + c) = make_float2(u0, u1);
    });
  if (Tm_out) {
    // Rows B of the hi tile (chunk length L = R columns), 16 bytes per copy.
    const int q8 = R / 8;
    for (int e = lane; e < 16 * q8; e += 32) {
      const int r = m0 + e / q8, c = 8 * (e % q8);
      if (r < n)
        *reinterpret_cast<uint4*>(Tm_out + (row0 + r) * R + c) =
            *reinterpret_cast<const uint4*>(s.th + r * ldl + c);
    }
  }
}

// The sequential pass. Chunk c + 1's k, U and gam are loaded (cp.async, double-buffered) while
// chunk c is computed, and its W once chunk c's W S no longer reads W: the chain from chunk to
// chunk is the two products and three barriers, no memory latency. Three blocks per SM.
template <class T>
__global__ void __launch_bounds__(kThreads, 3)
    gdn_state_fwd_kernel(const T* __restrict__ k, const float* __restrict__ gam,
                         const T* __restrict__ W, const float* U, T* Vn_out, const void* s0,
                         bool state_f32, Dims d, T* __restrict__ S_out,
                         float* __restrict__ s_final) {
  extern __shared__ float smem[];
  Carve carve{smem};
  StateFwdSmem<T> s(carve, d);
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, K = d.K, V = d.V;
  const int64_t c0 = int64_t(blockIdx.x) * kVt, ldk = s.ldk, ldv = s.ldv;
  const int w = int(V - c0 < kVt ? V - c0 : kVt);
  const int64_t KV = K * V;
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int nwarps = int(blockDim.x) / 32;
  auto rows_of = [&](int64_t ch) { return int(d.T - ch * d.L < d.L ? d.T - ch * d.L : d.L); };
  // Chunk ch's k, U and gam into buffer buf; its W into the single W tile.
  auto load_chunk = [&](int64_t ch, int buf) {
    const int64_t t0 = ch * d.L, row0 = bh * d.T + t0;
    const int n = rows_of(ch);
    tile_load_rows(k, d, b, h, t0, n, K, 0, int(K), pick(s.k, buf), ldk);
    tile_load_scratch(U, row0, n, V, c0, w, pick(s.Vn, buf), kVs);
    tile_load(gam + row0, n, 1, n, pick(s.gam, buf), n);
  };
  auto load_w = [&](int64_t ch) {
    tile_load_scratch(W, bh * d.T + ch * d.L, rows_of(ch), K, 0, int(K), s.W, ldk);
  };

  load_chunk(0, 0);
  load_w(0);
  tile_commit();
  for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
    const int i = idx / w, c = idx % w;
    s.S[i * kVs + c] = s0 ? load_any(s0, bh * KV + i * V + c0 + c, state_f32) : 0.0f;
  }
  for (int64_t ch = 0; ch < d.NC; ++ch) {
    const int64_t row0 = bh * d.T + ch * d.L;
    const int n = rows_of(ch), buf = int(ch & 1);
    T* kt = pick(s.k, buf);
    const float* U_t = pick(s.Vn, buf);
    const float* gm = pick(s.gam, buf);
    tile_wait();      // chunk ch's tiles (the only copies in flight)
    __syncthreads();  // ... visible to all; S complete; chunk ch - 1's buffers no longer read
    if (ch + 1 < d.NC) {
      load_chunk(ch + 1, buf ^ 1);
      tile_commit();
    }
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      S_out[(bh * d.NC + ch) * KV + i * V + c0 + c] = from_f32<T>(s.S[i * kVs + c]);
    }
    const float glast = gm[n - 1], elast = exp_t<T>(glast);
    // K~ = diag(D_{n-1,.}) K in place (k is read only by the state update): one pass (a warp per
    // row) instead of a multiply per fragment element; for bf16 the same rounding as on the fly.
    for (int r = warp; r < n; r += nwarps) {
      const float dec = exp_t<T>(glast - gm[r]);
      for (int i = lane; i < K; i += 32)
        kt[r * ldk + i] = from_f32<T>(dec * to_f32(kt[r * ldk + i]));
    }
    // Vn = U - W S: to the scratch (for the output and the backward) and to vt.
    block_mm_t<T>(n, w, int(K), RowA<T>{s.W, ldk}, RowB<float>{s.S, kVs},
                  Epi{[&](int r, int c, float ws) {
                        const float vn = U_t[r * kVs + c] - ws;
                        s.vt[r * ldv + c] = from_f32<T>(vn);
                        Vn_out[(row0 + r) * V + c0 + c] = from_f32<T>(vn);
                      },
                      [&](int r, int c, float ws0, float ws1) {
                        const float vn0 = U_t[r * kVs + c] - ws0, vn1 = U_t[r * kVs + c + 1] - ws1;
                        s.vt[r * ldv + c] = from_f32<T>(vn0);
                        s.vt[r * ldv + c + 1] = from_f32<T>(vn1);
                        store2(Vn_out, (row0 + r) * V + c0 + c, vn0, vn1);
                      }});
    __syncthreads();  // vt and K~ complete; W and S no longer read
    if (ch + 1 < d.NC) {
      load_w(ch + 1);
      tile_commit();
    }
    // S' = e_{n-1} S + K~^T Vn (each S element read and written by one thread).
    block_mm_t<T>(
        int(K), w, n, ColA<T>{kt, ldk}, RowB<T>{s.vt, ldv},
        Epi{[&](int i, int c, float kv) { s.S[i * kVs + c] = elast * s.S[i * kVs + c] + kv; },
            [&](int i, int c, float kv0, float kv1) { axpy2(s.S, i * kVs + c, elast, kv0, kv1); }});
  }
  __syncthreads();
  if (s_final) {
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      s_final[bh * KV + i * V + c0 + c] = s.S[i * kVs + c];
    }
  }
}

// The sequential pass with the state in registers (bf16; see reg_state_ok), the default where it
// applies. The shared-memory pass above spends a chunk step on barriers and shared-memory round
// trips of S for two small products; here each warp owns 16 columns of V and the whole K, so it
// needs no other warp's results and no barrier except the one per chunk for the shared tiles. It
// holds the transposed state S^T [16, K] (f32) as the C fragments of K / 8 MMA tiles and computes
//   Vn^T = U^T - S^T W^T          A = -S^T (its C fragments rounded to bf16 are an A fragment),
//                                 B = W^T (ldmatrix of the row-major W tile), C = U^T;
//   S^T <- e_{n-1} S^T + (Vn^T diag(D_{n-1,.})) K
//                                 A = Vn^T D (C fragments, each column j scaled by D_{n-1,j},
//                                 zero past the chunk's rows), B = K (ldmatrix.trans).
// With kOut (the forward; the backward's rerun needs S and Vn in the scratch instead) it also
// computes the chunk's output, so neither S nor Vn goes through memory and gdn_output_kernel is
// not launched:
//   O^T = (S^T Q^T) diag(scale e) + Vn^T P^T
//                                 A = -S^T as above, B = Q^T (ldmatrix), the columns scaled by
//                                 -scale e_r in f32; A = Vn^T (C fragments), B = P^T (ldmatrix of
//                                 P, lower: k steps <= the column step only).
// P_rj = scale (q_r . k_j) D_rj (j <= r) depends on the chunk only: the block's warps compute it
// together into shared memory after the chunk's tiles land (a second barrier per chunk).
// The block's warps cover 16 * warps columns of one head; they share the k, W (q) and gam tiles
// of the chunk (cp.async, double-buffered: chunk c + 1's in flight during chunk c, rows past the
// chunk zero-filled), and each lane loads its own U^T fragment of chunk c + 1 into registers during
// chunk c. So a chunk step is 2 * (L / 16) * (K / 8) MMAs per warp (about twice that with kOut)
// and no memory latency; the parallelism is (V / 16) warps per head instead of V / 32 blocks of 8
// warps taking turns at barriers. Rounding as the shared-memory pass and gdn_output_kernel, except
// that D scales Vn and scale e scales Q S (in f32, then rounded once / not at all) instead of K
// and Q.
template <int K, bool kOut, class Sh>
__global__ void __launch_bounds__(128)
    gdn_state_fwd_reg_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                             const float* __restrict__ gam, const bf16_t* __restrict__ W,
                             const float* __restrict__ U, bf16_t* __restrict__ Vn_out,
                             const void* s0, bool state_f32, float scale, Dims d,
                             bf16_t* __restrict__ S_out, float* __restrict__ s_final,
                             bf16_t* __restrict__ o) {
  constexpr int KT = K / 8;                  // n8 tiles of S^T
  constexpr int KS = K / 16;                 // k16 steps over K
  constexpr int LT = int(kGdnMaxChunk) / 8;  // n8 tiles of Vn^T and O^T (chunk rows)
  extern __shared__ float smem[];
  Sh::fix(d);
  Carve carve{smem};
  StateFwdRegSmem<bf16_t> s(carve, d, kOut, int(blockDim.x) / 32);
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, V = d.V, KV = int64_t(K) * V;
  const int64_t c0 = (int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * kRegCols;
  const bool active = c0 < V;  // warp-uniform: a warp past V only helps with the shared work
  const int64_t ld = s.ld, ldp = s.ldp;
  auto rows_of = [&](int64_t ch) { return int(d.T - ch * d.L < d.L ? d.T - ch * d.L : d.L); };
  auto load_chunk = [&](int64_t ch, int buf) {
    const int64_t t0 = ch * d.L, x0 = (b * d.T + t0) * d.H + h;
    const int n = rows_of(ch), np = (n + 15) / 16 * 16;
    tile_load_zfill(k + x0 * K, d.H * K, n, np, K, pick(s.k, buf), ld);
    if constexpr (kOut) tile_load_zfill(q + x0 * K, d.H * K, n, np, K, pick(s.q, buf), ld);
    tile_load_zfill(W + (bh * d.T + t0) * K, K, n, np, K, pick(s.W, buf), ld);
    vec_load_zfill(gam + bh * d.T + t0, n, np, pick(s.gam, buf));
  };
  // This lane's U^T fragments of chunk ch (zeros past its rows).
  float u[LT][4];
  auto load_u = [&](int64_t ch) {
    const int n = rows_of(ch);
    const float* Uc = U + (bh * d.T + ch * d.L) * V + c0 + g;
#pragma unroll
    for (int j = 0; j < LT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * j + 2 * t + e % 2;
        u[j][e] = r < n ? Uc[r * V + 8 * (e / 2)] : 0.0f;
      }
  };

  load_chunk(0, 0);
  tile_commit();
  float st[KT][4];  // S^T: st[j][e] = S[8 j + 2 t + e % 2][c0 + g + 8 (e / 2)]
#pragma unroll
  for (int j = 0; j < KT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      st[j][e] = s0 && active ? load_any(s0, bh * KV + (8 * j + 2 * t + e % 2) * V + c0 + g +
                                                 8 * (e / 2),
                                         state_f32)
                              : 0.0f;
  if (active) load_u(0);
  const WarpStage stage(s.stage, d);  // without kOut: S and Vn leave through it
  for (int64_t ch = 0; ch < d.NC; ++ch) {
    const int n = rows_of(ch), np = (n + 15) / 16 * 16, buf = int(ch & 1);
    const int64_t row0 = bh * d.T + ch * d.L;
    const bf16_t *kt = pick(s.k, buf), *Wt = pick(s.W, buf);
    const float* gm = pick(s.gam, buf);
    tile_wait();      // chunk ch's tiles (the only copies in flight)
    __syncthreads();  // ... visible to all; chunk ch - 1's buffers (and P) no longer read
    if (ch + 1 < d.NC) {
      load_chunk(ch + 1, buf ^ 1);
      tile_commit();
    }
    if constexpr (kOut) {
      // P_rj = scale (q_r . k_j) D_rj for j <= r < n, else 0 (the block's shared work).
      block_mma<Tri::kFull>(np, np, K, RowA<bf16_t>{pick(s.q, buf), ld}, ColB<bf16_t>{kt, ld},
                            [&](int r, int j, float qk) {
                              s.P[r * ldp + j] = from_f32<bf16_t>(
                                  j <= r && r < n ? scale * qk * exp_t<bf16_t>(gm[r] - gm[j]) : 0.0f);
                            });
      __syncthreads();
    }
    if (!active) continue;
    // -S^T as A fragments; without kOut the chunk's start state S (the same bf16 values) to the
    // scratch, through the warp's staging tile.
    uint32_t sa[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t p[4];
      tile::a_from_c(p, st, kk);
      if constexpr (!kOut) stage.put(kk, p);
#pragma unroll
      for (int e = 0; e < 4; ++e) sa[kk][e] = p[e] ^ 0x80008000u;  // the sign bits: -S exactly
    }
    float vn[LT][4];
#pragma unroll
    for (int j = 0; j < LT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) vn[j][e] = u[j][e];
    if (ch + 1 < d.NC) load_u(ch + 1);  // in flight during the products below
    // Vn^T = U^T - S^T W^T (and -S^T Q^T for the output), 16 chunk rows (two n8 tiles) at a time.
    float ot[kOut ? LT : 1][4];
#pragma unroll
    for (int jp = 0; jp < LT / 2; ++jp) {
      if (16 * jp >= n) break;
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t b[4];
        tile::frag_b2(b, Wt, ld, 16 * kk, 16 * jp, lane);
        tile::mma_x2(vn[2 * jp], vn[2 * jp + 1], sa[kk], b);
      }
      if constexpr (kOut) {
#pragma unroll
        for (int e = 0; e < 4; ++e) ot[2 * jp][e] = ot[2 * jp + 1][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
          uint32_t b[4];
          tile::frag_b2(b, pick(s.q, buf), ld, 16 * kk, 16 * jp, lane);
          tile::mma_x2(ot[2 * jp], ot[2 * jp + 1], sa[kk], b);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r0 = 16 * jp + 2 * t + e % 2, r1 = r0 + 8;
          ot[2 * jp][e] *= -scale * exp_t<bf16_t>(gm[r0]);
          ot[2 * jp + 1][e] *= -scale * exp_t<bf16_t>(gm[r1]);
        }
      }
    }
    // S leaves the staging tile only now, with the products above in flight (flushed right after
    // stmatrix, the 16-byte loads waited for it on the chain: ncu, 2026-12-01 session 3).
    if constexpr (!kOut) stage.flush(S_out + (bh * d.NC + ch) * KV, V, c0, K);
    // Vn in bf16: A fragments of Vn^T (for the output) and, without kOut, to the scratch (rows
    // < n; stored after the state update's products are issued); then A = Vn^T diag(D_{n-1,.})
    // for the state update.
    const float glast = gm[n - 1], elast = exp_t<bf16_t>(glast);
    uint32_t va[LT / 2][4], vb[kOut ? LT / 2 : 1][4];
#pragma unroll
    for (int kr = 0; kr < LT / 2; ++kr) {
      if (16 * kr >= n) break;
      if constexpr (kOut) {
        tile::a_from_c(vb[kr], vn, kr);
      } else {
        uint32_t pv[4];  // Vn^T's block: as S^T's above
        tile::a_from_c(pv, vn, kr);
        stage.put(kr, pv);
      }
      float dec[4];
#pragma unroll
      for (int q4 = 0; q4 < 4; ++q4) {
        const int r = 16 * kr + 8 * (q4 / 2) + 2 * t + q4 % 2;
        dec[q4] = r < n ? exp_t<bf16_t>(glast - gm[r]) : 0.0f;
      }
      va[kr][0] = mma::pack_bf16x2(vn[2 * kr][0] * dec[0], vn[2 * kr][1] * dec[1]);
      va[kr][1] = mma::pack_bf16x2(vn[2 * kr][2] * dec[0], vn[2 * kr][3] * dec[1]);
      va[kr][2] = mma::pack_bf16x2(vn[2 * kr + 1][0] * dec[2], vn[2 * kr + 1][1] * dec[3]);
      va[kr][3] = mma::pack_bf16x2(vn[2 * kr + 1][2] * dec[2], vn[2 * kr + 1][3] * dec[3]);
    }
    if constexpr (kOut) {
      // O^T += Vn^T P^T (P lower: the k steps kr <= jp), then O (rows < n) to the output.
      bf16_t* const o_c = o + ((b * d.T + ch * d.L) * d.H + h) * V;
#pragma unroll
      for (int jp = 0; jp < LT / 2; ++jp) {
        if (16 * jp >= n) break;
#pragma unroll
        for (int kr = 0; kr <= jp; ++kr) {
          uint32_t b[4];
          tile::frag_b2(b, s.P, ldp, 16 * kr, 16 * jp, lane);
          tile::mma_x2(ot[2 * jp], ot[2 * jp + 1], vb[kr], b);
        }
        const int64_t hv = d.H * V;
        store_row_pairs(o_c, hv, 16 * jp + 2 * t, c0 + g,
                        mma::pack_bf16x2(ot[2 * jp][0], ot[2 * jp][1]), n);
        store_row_pairs(o_c, hv, 16 * jp + 2 * t, c0 + g + 8,
                        mma::pack_bf16x2(ot[2 * jp][2], ot[2 * jp][3]), n);
        store_row_pairs(o_c, hv, 16 * jp + 8 + 2 * t, c0 + g,
                        mma::pack_bf16x2(ot[2 * jp + 1][0], ot[2 * jp + 1][1]), n);
        store_row_pairs(o_c, hv, 16 * jp + 8 + 2 * t, c0 + g + 8,
                        mma::pack_bf16x2(ot[2 * jp + 1][2], ot[2 * jp + 1][3]), n);
      }
    }
    // S^T <- e_{n-1} S^T + (Vn^T D) K
#pragma unroll
    for (int j = 0; j < KT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[j][e] *= elast;
#pragma unroll
    for (int kr = 0; kr < LT / 2; ++kr) {
      if (16 * kr >= n) break;
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t b[4];
        tile::frag_b2_trans(b, kt, ld, 16 * kr, 16 * kk, lane);
        tile::mma_x2(st[2 * kk], st[2 * kk + 1], va[kr], b);
      }
    }
    if constexpr (!kOut) stage.flush(Vn_out + row0 * V, V, c0, n);
  }
  if (s_final && active) {
#pragma unroll
    for (int j = 0; j < KT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s_final[bh * KV + (8 * j + 2 * t + e % 2) * V + c0 + g + 8 * (e / 2)] = st[j][e];
  }
}

// Three blocks per SM (48 KB of shared memory each for bf16; left alone, the bf16 build takes
// more registers than three blocks allow; ptxas fits it in 80 without spills). The [K, 32] state
// and [n, 32] Vn tiles of V tile j + 1 load while tile j is multiplied.
template <class T>
__global__ void __launch_bounds__(kThreads, 3)
    gdn_output_kernel(const T* __restrict__ q, const T* __restrict__ k,
                      const float* __restrict__ gam, const T* __restrict__ Vn,
                      const T* __restrict__ S_in, float scale, Dims d, T* __restrict__ o) {
  extern __shared__ float smem[];
  Carve carve{smem};
  OutputSmem<T> s(carve, d);
  const ChunkPos p = chunk_pos(d);
  const int n = p.n;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0, ldk = s.ldk, ldp = s.ldp, ldv = s.ldv;
  const T* S = S_in + (p.bh * d.NC + p.c) * K * V;
  auto load_tile = [&](int64_t c0, int buf) {
    const int w = int(V - c0 < kVt ? V - c0 : kVt);
    tile_load_scratch(S, 0, int(K), V, c0, w, pick(s.S, buf), ldv);
    tile_load_scratch(Vn, row0, n, V, c0, w, pick(s.Vn, buf), ldv);
  };

  tile_load_rows(q, d, p.b, p.h, p.t0, n, K, 0, int(K), s.q, ldk);
  tile_load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, ldk);
  tile_commit();
  load_tile(0, 0);
  tile_commit();
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    s.gam[r] = gam[row0 + r];
    s.qe[r] = scale * exp_t<T>(gam[row0 + r]);
  }
  tile_wait<1>();  // q and k (the first V tile may still be in flight)
  __syncthreads();
  block_mm_t<T>(n, n, int(K), RowA<T>{s.q, ldk}, ColB<T>{s.k, ldk}, [&](int r, int j, float qk) {
    s.P[r * ldp + j] = from_f32<T>(j <= r ? scale * qk * exp_t<T>(s.gam[r] - s.gam[j]) : 0.0f);
  });
  for (int64_t c0 = 0, it = 0; c0 < V; c0 += kVt, ++it) {
    const int w = int(V - c0 < kVt ? V - c0 : kVt), buf = int(it & 1);
    const T *St = pick(s.S, buf), *Vt = pick(s.Vn, buf);
    __syncthreads();  // P complete; the other buffer's tile (two tiles back) no longer read
    if (c0 + kVt < V) load_tile(c0 + kVt, buf ^ 1);
    tile_commit();  // possibly empty: one group per tile keeps tile_wait<1> exact
    if (it == 0) {
      // Q~ = scale diag(e) Q in place (q is no longer read as itself): the product's A operand
      // without a multiply per fragment element (for bf16 the same rounding as on the fly).
      const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
      for (int r = int(threadIdx.x) / 32; r < n; r += nw)
        for (int i = lane; i < K; i += 32)
          s.q[r * ldk + i] = from_f32<T>(s.qe[r] * to_f32(s.q[r * ldk + i]));
    }
    tile_wait<1>();  // this tile landed (the next one may still be in flight)
    __syncthreads();
    // O = [Q~ | P] [S; Vn]: one product over the concatenated k = (K, then the rows).
    block_mm_t<T>(n, w, int(K) + n, CatA{RowA<T>{s.q, ldk}, RowA<T>{s.P, ldp}, int(K)},
                  CatB{RowB<T>{St, ldv}, RowB<T>{Vt, ldv}, int(K)},
                  Epi{[&](int r, int c, float x) {
                        o[((p.b * d.T + p.t0 + r) * d.H + p.h) * V + c0 + c] = from_f32<T>(x);
                      },
                      [&](int r, int c, float x0, float x1) {
                        store2(o, ((p.b * d.T + p.t0 + r) * d.H + p.h) * V + c0 + c, x0, x1);
                      }});
  }
}

// The register-state forward pass; with q and o (kOut) it also writes the output and neither S
// nor Vn.
template <int K, bool kOut>
void launch_state_fwd_reg(const bf16_t* q, const bf16_t* k, const void* s0, bool state_f32,
                          float scale, const Dims& d, const Scratch<bf16_t>& sc, float* s_final,
                          bf16_t* o, cudaStream_t stream) {
  const int warps = reg_state_warps(), cols = warps * kRegCols;
  const dim3 grid(unsigned((d.V + cols - 1) / cols), unsigned(d.H), unsigned(d.B));
  const int64_t smem = smem_bytes<StateFwdRegSmem<bf16_t>>(d, kOut, warps);
  with_shape<bf16_t, K>(d, [&](auto sh) {
    auto* kernel = gdn_state_fwd_reg_kernel<K, kOut, decltype(sh)>;
    allow_smem(kernel);
    kernel<<<grid, 32 * warps, smem, stream>>>(q, k, sc.gam, sc.W, sc.U, sc.Vn, s0, state_f32,
                                               scale, d, sc.S, s_final, o);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

// The forward's output fused into the register-state pass: bf16, AMOR_GDN_VARIANT=fused, K <= 64
// (the fused pass's registers: with K = 128 it would spill), and at least one block of the pass
// per multiprocessor. With fewer (few sequences, long T) the pass runs one block per SM at most,
// its chain of chunks is the whole forward, and the output's products are better taken out of
// it into the parallel output kernel: H200, H24 K64 V128 (bench-gdn, 2026-12-01 session 2),
// fused / separate 898 / 925 us at B8 T2K (384 blocks), 906 / 989 at B4 T4K (192), 1273 / 1096
// at B2 T8K (96), 2168 / 1470 at B1 T16K (48).
template <class T>
bool fused_output_ok(const Dims& d, const void* q, const void* k) {
  const int64_t blocks = d.B * d.H * ceil_div(d.V, int64_t(reg_state_warps()) * kRegCols);
  return reg_state_ok<T>(d, k) && variant() == Variant::kFused && d.K <= 64 &&
         reinterpret_cast<uintptr_t>(q) % 16 == 0 && blocks >= num_sms();
}

template <class T>
void forward_typed(const void* q, const void* k, const void* v, const void* g, const void* beta,
                   bool gate_f32, const void* s0, bool state_f32, float scale, void* o,
                   float* s_final, float* scratch, float* saved, const Dims& d,
                   cudaStream_t stream) {
  // With `saved`, the intermediates the backward reads (gam, W, Tm, S, Vn) go there and stay, and
  // they are what the backward's recomputation (launch_intermediates) computes, bit for bit.
  Carve kept{saved ? saved : scratch}, work{saved ? scratch : nullptr};
  const Scratch<T> sc(kept, saved ? work : kept, d, saved != nullptr, true, false);
  const T* kp = static_cast<const T*>(k);
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (fused_fwd_ok(d, q, k, v, o)) {
      // The fused forward (gated_delta_fwd_fused_cuda.cu). Without `saved`: gam and Tm from the
      // Tm-only prepare into the scratch, then the fused pass. With it (fused_keep_ok): gam, W
      // and Tm from the prepare into `saved`, then the fused pass, which also stores S and Vn
      // there. AMOR_GDN_FWD_KEEP=state: the three-kernel forward's prepare and state pass for the
      // intermediates, then the fused pass for o. Either way o and the final state are the fused
      // pass's on the same gam and Tm (every prepare form gives their bits): the same bits as
      // without `saved`.
      const T *qp = static_cast<const T*>(q), *vp = static_cast<const T*>(v);
      T* op = static_cast<T*>(o);
      // The second form's ChunkRows (P with it where p_from_prepare) in U's place (Scratch),
      // which no fused form uses.
      const ChunkRows rows = chunk_rows_at(sc.U, d, p_from_prepare(d));
      const ChunkRows* const rp = fused_takes_rows(d) ? &rows : nullptr;
      if (!saved) {
        Carve c{scratch};  // (gam and Tm below U: Scratch's gam, W, Vn, S come first)
        float* const gam = c.take_as<float>(d.B * d.H * d.T);
        bf16_t* const tm = c.take_as<bf16_t>(d.B * d.H * d.T * d.L);
        launch_prepare_tm(kp, g, beta, gate_f32, d, gam, nullptr, tm, stream, rp, qp, scale);
        return launch_fwd_fused(qp, kp, vp, beta, gate_f32, s0, state_f32, scale, d, gam, tm,
                                s_final, op, nullptr, nullptr, stream, rows);
      }
      if (fused_keep_ok(d, k, v)) {
        launch_prepare_tm(kp, g, beta, gate_f32, d, sc.gam, sc.W, sc.Tm, stream, rp, qp, scale);
        return launch_fwd_fused(qp, kp, vp, beta, gate_f32, s0, state_f32, scale, d, sc.gam,
                                sc.Tm, s_final, op, sc.S, sc.Vn, stream, rows);
      }
      launch_prepare(kp, vp, g, beta, gate_f32, d, sc, stream);
      launch_state_fwd(kp, s0, state_f32, d, sc, nullptr, stream);
      // The full prepare writes no ChunkRows and needs U until the state pass is done: the
      // Tm-only prepare again for them (gam and Tm rewritten with their same bits).
      if (rp) launch_prepare_tm(kp, g, beta, gate_f32, d, sc.gam, nullptr, sc.Tm, stream, rp, qp,
                                scale);
      return launch_fwd_fused(qp, kp, vp, beta, gate_f32, s0, state_f32, scale, d, sc.gam, sc.Tm,
                              s_final, op, nullptr, nullptr, stream, rows);
    }
    if (saved && fused_keep_ok(d, k, v)) {
      // The fused pass's intermediates (as the backward recomputes them), the output from them.
      launch_intermediates(kp, static_cast<const T*>(v), g, beta, gate_f32, s0, state_f32, d, sc,
                           s_final, stream);
      if (output_tc_ok(d, q, k, o))
        return launch_output_tc(static_cast<const T*>(q), kp, scale, d, sc, static_cast<T*>(o),
                                stream);
      const int64_t smem = smem_bytes<OutputSmem<T>>(d);
      allow_smem(gdn_output_kernel<T>);
      const dim3 grid(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
      gdn_output_kernel<T><<<grid, kThreads, smem, stream>>>(
          static_cast<const T*>(q), kp, sc.gam, sc.Vn, sc.S, scale, d, static_cast<T*>(o));
      AMOR_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  launch_prepare(kp, static_cast<const T*>(v), g, beta, gate_f32, d, sc, stream);
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (!saved && fused_output_ok<T>(d, q, k)) {
      const T* qp = static_cast<const T*>(q);
      T* op = static_cast<T*>(o);
      switch (d.K) {
        case 32:
          return launch_state_fwd_reg<32, true>(qp, kp, s0, state_f32, scale, d, sc, s_final, op,
                                                stream);
        case 48:
          return launch_state_fwd_reg<48, true>(qp, kp, s0, state_f32, scale, d, sc, s_final, op,
                                                stream);
        case 64:
          return launch_state_fwd_reg<64, true>(qp, kp, s0, state_f32, scale, d, sc, s_final, op,
                                                stream);
      }
    }
  }
  launch_state_fwd(kp, s0, state_f32, d, sc, s_final, stream);
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (reg_state_ok<T>(d, k) && output_tc_ok(d, q, k, o)) {
      return launch_output_tc(static_cast<const T*>(q), kp, scale, d, sc, static_cast<T*>(o),
                              stream);
    }
  }
  const int64_t smem = smem_bytes<OutputSmem<T>>(d);
  allow_smem(gdn_output_kernel<T>);
  const dim3 grid(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  gdn_output_kernel<T><<<grid, kThreads, smem, stream>>>(static_cast<const T*>(q), kp, sc.gam,
                                                         sc.Vn, sc.S, scale, d, static_cast<T*>(o));
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void launch_prepare(const T* k, const T* v, const void* g, const void* beta, bool gate_f32,
                    const Dims& d, const Scratch<T>& sc, cudaStream_t stream) {
  const dim3 grid(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (prepare_variant_reg() && d.L % 16 == 0 && d.K % 16 == 0 && d.V % 16 == 0 &&
        reinterpret_cast<uintptr_t>(k) % 16 == 0 && reinterpret_cast<uintptr_t>(v) % 16 == 0) {
      with_shape<T>(d, [&](auto sh) {
        auto* kernel = gdn_prepare_reg_kernel<decltype(sh), PrepOut::kAll>;
        allow_smem(kernel);
        kernel<<<grid, kPrepWarps * 32, smem_bytes<PrepareRegSmem<T>>(d), stream>>>(
            k, v, g, beta, gate_f32, d, sc.gam, sc.W, sc.U, sc.Tm, ChunkRows{}, nullptr, 0.0f);
        AMOR_CUDA_CHECK_LAUNCH();
      });
      return;
    }
  }
  with_shape<T>(d, [&](auto sh) {
    auto* kernel = gdn_prepare_kernel<T, decltype(sh)>;
    allow_smem(kernel);
    kernel<<<grid, kThreads, smem_bytes<PrepareSmem<T>>(d), stream>>>(k, v, g, beta, gate_f32, d,
                                                                      sc.gam, sc.W, sc.U, sc.Tm);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

void launch_prepare_tm(const bf16_t* k, const void* g, const void* beta, bool gate_f32,
                       const Dims& d, float* gam, bf16_t* W, bf16_t* Tm, cudaStream_t stream,
                       const ChunkRows* rows, const bf16_t* q, float scale) {
  const ChunkRows r = rows ? *rows : ChunkRows{};
  const dim3 grid(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  const int64_t smem = smem_bytes<PrepareRegSmem<bf16_t>>(
      prepare_layout_dims(d, true, r.e != nullptr && r.P != nullptr));
  with_shape<bf16_t>(d, [&](auto sh) {
    auto launch = [&](auto* kernel) {
      allow_smem(kernel);
      kernel<<<grid, kPrepWarps * 32, smem, stream>>>(k, nullptr, g, beta, gate_f32, d, gam, W,
                                                      nullptr, Tm, r, q, scale);
      AMOR_CUDA_CHECK_LAUNCH();
    };
    if (W)
      launch(gdn_prepare_reg_kernel<decltype(sh), PrepOut::kWTm>);
    else
      launch(gdn_prepare_reg_kernel<decltype(sh), PrepOut::kTm>);
  });
}

template <class T>
void launch_state_fwd(const T* k, const void* s0, bool state_f32, const Dims& d,
                      const Scratch<T>& sc, float* s_final, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (reg_state_ok<T>(d, k)) {
      auto run = [&](auto kk) {
        launch_state_fwd_reg<decltype(kk)::value, false>(nullptr, k, s0, state_f32, 0.0f, d, sc,
                                                         s_final, nullptr, stream);
      };
      switch (d.K) {
        case 32: return run(std::integral_constant<int, 32>{});
        case 48: return run(std::integral_constant<int, 48>{});
        case 64: return run(std::integral_constant<int, 64>{});
        case 128: return run(std::integral_constant<int, 128>{});
      }
    }
  }
  const dim3 grid(unsigned((d.V + kVt - 1) / kVt), unsigned(d.H), unsigned(d.B));
  allow_smem(gdn_state_fwd_kernel<T>);
  gdn_state_fwd_kernel<T><<<grid, kThreads, smem_bytes<StateFwdSmem<T>>(d), stream>>>(
      k, sc.gam, sc.W, sc.U, sc.Vn, s0, state_f32, d, sc.S, s_final);
  AMOR_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_intermediates(const T* k, const T* v, const void* g, const void* beta, bool gate_f32,
                          const void* s0, bool state_f32, const Dims& d, const Scratch<T>& sc,
                          float* s_final, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    if (fused_keep_ok(d, k, v)) {
      // gam, W, Tm (no U: the fused pass reads v), then the fused pass without o for S and Vn.
      const ChunkRows rows = chunk_rows_at(sc.U, d, false);  // U's place, as forward_typed
      launch_prepare_tm(k, g, beta, gate_f32, d, sc.gam, sc.W, sc.Tm, stream,
                        fused_takes_rows(d) ? &rows : nullptr);
      return launch_fwd_fused(nullptr, k, v, beta, gate_f32, s0, state_f32, 0.0f, d, sc.gam,
                              sc.Tm, s_final, nullptr, sc.S, sc.Vn, stream, rows);
    }
  }
  launch_prepare(k, v, g, beta, gate_f32, d, sc, stream);
  launch_state_fwd(k, s0, state_f32, d, sc, s_final, stream);
}

template void launch_intermediates<float>(const float*, const float*, const void*, const void*,
                                          bool, const void*, bool, const Dims&,
                                          const Scratch<float>&, float*, cudaStream_t);
template void launch_intermediates<bf16_t>(const bf16_t*, const bf16_t*, const void*, const void*,
                                           bool, const void*, bool, const Dims&,
                                           const Scratch<bf16_t>&, float*, cudaStream_t);
template void launch_prepare<float>(const float*, const float*, const void*, const void*, bool,
                                    const Dims&, const Scratch<float>&, cudaStream_t);
template void launch_prepare<bf16_t>(const bf16_t*, const bf16_t*, const void*, const void*, bool,
                                     const Dims&, const Scratch<bf16_t>&, cudaStream_t);
template void launch_state_fwd<float>(const float*, const void*, bool, const Dims&,
                                      const Scratch<float>&, float*, cudaStream_t);
template void launch_state_fwd<bf16_t>(const bf16_t*, const void*, bool, const Dims&,
                                       const Scratch<bf16_t>&, float*, cudaStream_t);

}  // namespace gdn

namespace gdn {
namespace {
template <class T>
int64_t max_smem_bytes(const Dims& d) {
  int64_t m = 0;
  for (int64_t b :
       {smem_bytes<PrepareSmem<T>>(d), smem_bytes<StateFwdSmem<T>>(d), smem_bytes<OutputSmem<T>>(d),
        smem_bytes<StateBwdSmem<T>>(d), smem_bytes<BwdQkSmem<T>>(d), smem_bytes<BwdWySmem<T>>(d)})
    m = b > m ? b : m;
  // The register-state passes (bf16, K <= 128 only; the backward's wide pass takes fewer warps
  // where its layout would not fit, state_bwd_wide_warps).
  if (sizeof(T) == 2 && d.K <= 128) {
    for (int64_t b : {smem_bytes<StateFwdRegSmem<T>>(d, true, 4),
                      smem_bytes<StateFwdRegSmem<T>>(d, false, 4)})
      m = b > m ? b : m;
    if (d.L == 64 && (d.K == 64 || d.K == 128)) m = std::max(m, output_tc_smem_bytes(d));
    if (d.L % 16 == 0 && d.K % 16 == 0 && d.V % 16 == 0)
      m = std::max(m, smem_bytes<PrepareRegSmem<T>>(d));
    m = std::max(m, fwd_fused_smem_bytes(d));
  }
  return m;
}
}  // namespace
}  // namespace gdn

int64_t gated_delta_max_smem_bytes(DType t, const GdnShape& s) {
  const gdn::Dims d = gdn::dims_of(s);
  return t == DType::F32 ? gdn::max_smem_bytes<float>(d) : gdn::max_smem_bytes<bf16_t>(d);
}

// Sizes: the larger of the two dtypes' layouts (f32 stores every array in f32, bf16 adds a bf16
// Vn next to the f32 U), so one size serves both.
namespace {
template <class F>
int64_t larger_layout(F&& carve) {
  gdn::Carve kf{nullptr}, wf{nullptr}, kb{nullptr}, wb{nullptr};
  const int64_t f = carve(std::type_identity<gdn::Scratch<float>>{}, kf, wf),
                b = carve(std::type_identity<gdn::Scratch<bf16_t>>{}, kb, wb);
  return f > b ? f : b;
}
}  // namespace

int64_t gated_delta_saved_floats(const GdnShape& s) {
  return larger_layout([&](auto tag, gdn::Carve& kept, gdn::Carve& work) {
    typename decltype(tag)::type sc(kept, work, gdn::dims_of(s), true, false, false);
    return kept.used;
  });
}

int64_t gated_delta_forward_scratch_floats(const GdnShape& s, bool saved) {
  return larger_layout([&](auto tag, gdn::Carve& kept, gdn::Carve& work) {
    typename decltype(tag)::type sc(kept, saved ? work : kept, gdn::dims_of(s), saved, true, false);
    return saved ? work.used : kept.used;
  });
}

int64_t gated_delta_backward_scratch_floats(const GdnShape& s, bool saved) {
  return larger_layout([&](auto tag, gdn::Carve& kept, gdn::Carve& work) {
    typename decltype(tag)::type sc(kept, saved ? work : kept, gdn::dims_of(s), true, !saved, true);
    return saved ? work.used : kept.used;
  });
}

void gated_delta_forward(DType t, const void* q, const void* k, const void* v, const void* g,
                         const void* beta, bool gate_f32, const void* s0, bool state_f32,
                         float scale, void* o, float* s_final, float* scratch, const GdnShape& s,
                         cudaStream_t stream, float* saved) {
  const gdn::Dims d = gdn::dims_of(s);
  if (t == DType::F32)
    gdn::forward_typed<float>(q, k, v, g, beta, gate_f32, s0, state_f32, scale, o, s_final, scratch,
                              saved, d, stream);
  else
    gdn::forward_typed<bf16_t>(q, k, v, g, beta, gate_f32, s0, state_f32, scale, o, s_final,
                               scratch, saved, d, stream);
}

}  // namespace amor::cuda
