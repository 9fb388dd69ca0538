// Mamba2 SSD scan backward on tensor cores, for bf16 storage: the dx and dB/dC kernels of
// ssd_backward_cuda.cu (same math, notation, inputs, outputs and blocks: 256 threads per
// (b, h, chunk)) with their matrix products as mma m16n8k16 on bf16 tiles in shared memory and
// f32 accumulation (ssd_mma.cuh); f32 inputs keep the SIMT kernels there. Per chunk:
//   dx kernel   K = C B^T, dM = dy x^T           (Q x Q, K = N and K = P; above-diagonal
//                                                 tiles skipped)
//               KE = K E masked, rounded to bf16; Tm = dM K E stays f32 (ddt, dcum)
//               G B_j (Q x P, K = N, G rounded to bf16), KE^T dy (Q x P, K = Q, causal part)
//   dbc kernel  dM = dy x^T, A2 = dM E dt masked, rounded to bf16
//               dC = diag(exp(cum)) dy S + A2 B   (Q x N, K = P then the causal part of Q)
//               dB = diag(w) x G + A2^T C         (Q x N, K = P then the causal part of Q)
//               dcum_i += C_i . (exp(cum_i) S^T dy_i): per warp tile a row sum over its 32
//               columns (quad shuffles), then a fixed-order sum over the tiles (no atomics)
// The reductions over steps (ddt, dcum, dD, <G, S>) stay f32 scalar code on f32 values.
// Shared memory at Q = 64, P = 64, N = 128: dx 94.5 KiB, dbc 80 KiB (two blocks per SM each,
// also by their 112 and 116 registers; the f32 kernels' 147 KiB and 154 KiB fit one).
// The rows (and the bf16 states) are copied in by cp.async, all in flight at once. With bf16
// states (S = bf16_t: the span path of ssd_backward_cuda.cu, where dbc_heads_fit does not hold)
// the dbc kernel's G tile has its own buffer, copied in with the rows: 97 KiB (108 registers),
// still two blocks per SM; dBh, dCh are written as bf16 (half the bytes of the largest
// intermediate).
// The span path's dx is dx_reg_kernel (the Tm and G B_j reductions from the mma fragments by
// warp shuffles, G copied into C's tile after the KE products: 63.5 KiB, 80 registers, three
// blocks a SM at the 1.5B shape), and its dB, dC where they fit dbc_heads_tc_kernel (one barrier
// a head less than block_sum's, A2 by bf16 pairs). Until 2026-12-02 session 7 AMOR_SSD_BWD=tile
// kept the span path's earlier dx (dx_tc_kernel on bf16 states, 111.5 KiB: 613 us against
// dx_reg's 402 at H64 T2K) and dbc_heads without those two changes (654 us against 615).
#include <string>
#include <type_traits>

#include "kernels/core/env_switch.h"
#include "kernels/ssd/ssd_mma.cuh"

namespace amor::cuda {
namespace ssd {
namespace {

using tc::kLog2e;
using tc::pad16;
using tc::stride_of;
using tc::tile_bytes;
using tc::WarpTile;

// Where dbc_tc_kernel<bf16_t> keeps its own G tile: after dbc_tc_smem's bytes, 16-byte aligned.
__host__ __device__ inline int64_t dbc_g_offset(const Dims& k) {
  const int64_t nparts = (pad16(int(k.N)) + 31) / 32;
  const int64_t base = 2 * tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) +
                       tile_bytes(k.Q, k.Q) + tile_bytes(k.P, k.N) +
                       4 * (pad16(int(k.Q)) * nparts + 3 * k.Q);
  return (base + 15) / 16 * 16;
}
int64_t dbc_spans_smem(const Dims& k) { return dbc_g_offset(k) + tile_bytes(k.P, k.N); }

// The bf16 tiles both dx kernels start their shared memory with: C's rows (later G [P][N] in the
// same place: max(Q, P) rows), B's rows, x, dy and KE [Q][Q]; rest is the first byte after them.
// load starts the copies of chunk ch's C, B, x and dy rows (cp.async, not committed).
struct DxTiles {
  bf16_t *CG, *Bs, *xs, *dys, *KE;
  unsigned char* rest;
  __device__ DxTiles(unsigned char* at, int Q, int P, int N) {
    CG = reinterpret_cast<bf16_t*>(at);
    at += tile_bytes(Q > P ? Q : P, N);
    Bs = reinterpret_cast<bf16_t*>(at);
    at += tile_bytes(Q, N);
    xs = reinterpret_cast<bf16_t*>(at);
    at += tile_bytes(Q, P);
    dys = reinterpret_cast<bf16_t*>(at);
    at += tile_bytes(Q, P);
    KE = reinterpret_cast<bf16_t*>(at);
    rest = at + tile_bytes(Q, Q);
  }
  __device__ void load(const Dims& k, const Chunk& ch, const bf16_t* Cm, const bf16_t* Bm,
                       const bf16_t* x, const bf16_t* dy) const {
    const int P = int(k.P), N = int(k.N), sN = stride_of(N), sP = stride_of(P);
    tc::load_rows_async(CG, sN, Cm, ch.b, ch.g, ch.t0, ch.len, k.T, k.G, N);
    tc::load_rows_async(Bs, sN, Bm, ch.b, ch.g, ch.t0, ch.len, k.T, k.G, N);
    tc::load_rows_async(xs, sP, x, ch.b, ch.h, ch.t0, ch.len, k.T, k.H, P);
    tc::load_rows_async(dys, sP, dy, ch.b, ch.h, ch.t0, ch.len, k.T, k.H, P);
  }
};

// dx, the partial ddt and dcum, the dD partial of one chunk (see dx_kernel), on the per-chunk
// path's f32 chunk states and state gradients (the span path's bf16 ones: dx_reg_kernel below).
template <class Sh>
__global__ void __launch_bounds__(kThreads)
    dx_tc_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                 const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                 const float* __restrict__ D, const bf16_t* __restrict__ dy,
                 const float* __restrict__ cum, const float* __restrict__ states,
                 const float* __restrict__ grads, bf16_t* __restrict__ dx,
                 float* __restrict__ ddt, float* __restrict__ dcum,
                 float* __restrict__ partials) {
  extern __shared__ uint4 smem_raw[];
  __shared__ float red[32];
  const Chunk ch = chunk_of_block<Sh>(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  const DxTiles tiles(reinterpret_cast<unsigned char*>(smem_raw), Q, P, N);
  bf16_t *const CG = tiles.CG, *const Bs = tiles.Bs, *const xs = tiles.xs;  // CG: C, then G
  bf16_t *const dys = tiles.dys, *const KE = tiles.KE;
  float* Tm = reinterpret_cast<float*>(tiles.rest);  // [Q][Q+1]
  float* GB = Tm + Q * (Q + 1);                      // [Q][P+1]
  float* cm = GB + Q * (P + 1);
  float* dts = cm + Q;
  float* wv = dts + Q;
  float* wdw = wv + Q;
  // The G tile takes C's place once the C products are done.
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  tiles.load(k, ch, Cm, Bm, x, dy);
  mma::cp_async_commit();
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  mma::cp_async_wait<0>();
  __syncthreads();
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  for (int j = threadIdx.x; j < L; j += blockDim.x) wv[j] = expf(cm[L - 1] - cm[j]) * dts[j];
  // KE = K E (bf16, zero off j <= i and in the padding) and Tm = dM K E (f32) on j <= i.
  tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
    WarpTile<1, 2> ke(m0, n0, Lp, Lp), dm(m0, n0, Lp, Lp);
    if (n0 <= m0 + 15) {  // else all above the diagonal
      ke.mac<false, false>(CG, sN, Bs, sN, 0, Np);
      dm.mac<false, false>(dys, sP, xs, sP, 0, Pp);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = ke.row(0, e), c = ke.col(j, e);
        if (c >= Lp) continue;
        const float v =
            c <= r && r < L ? ke.c[0][j][e] * mma::exp2_approx((cm[r] - cm[c]) * kLog2e) : 0.0f;
        KE[r * sQ + c] = from_f32<bf16_t>(v);
        if (r < L && c < L) Tm[r * (Q + 1) + c] = v * dm.c[0][j][e];
      }
  });
  __syncthreads();
  // G replaces C, <G, S> on the way; the skip's dD.
  float gs = tc::load_state_bf16(CG, sN, grads + state_at, P, N, states + state_at);
  float dd = tc::tile_dot_bf16(dys, xs, sP, L, P);
  gs = block_sum(gs, red);
  dd = block_sum(dd, red);  // block_sum ends with a barrier: CG holds G from here on
  const float d = D[ch.h];
  bf16_t* dxc = dx + ((ch.b * k.T + ch.t0) * k.H + ch.h) * P;
  const bool pairs = P % 2 == 0;  // dx rows start 4-byte aligned: stores by bf16 pairs
  tc::for_warp_tiles<1, 2>(Lp, Pp, [&](int m0, int n0) {
    WarpTile<1, 2> gb(m0, n0, Lp, Pp), acc(m0, n0, Lp, Pp);
    gb.mac<false, false>(Bs, sN, CG, sN, 0, Np);     // (G B_j)_p = sum_n B_jn G_pn
    acc.mac<true, true>(KE, sQ, dys, sP, m0, Lp);    // sum_{i >= j} KE_ij dy_ip
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the fragments
      const int r = gb.row(0, 2 * h);
      if (r >= L) continue;
      const float dr = dts[r], wr = wv[r];
      bf16_t* dxr = dxc + int64_t(r) * k.H * P;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int p = gb.col(j, 2 * h);  // even: P even and p < P imply p + 1 < P
        if (p >= P) continue;
        float v[2] = {0.0f, 0.0f};
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const float gv = gb.c[0][j][2 * h + q], av = acc.c[0][j][2 * h + q];
          if (p + q < P) {
            GB[r * (P + 1) + p + q] = gv;
            v[q] = d * to_f32(dys[r * sP + p + q]) + dr * av + wr * gv;
          }
        }
        if (pairs) {
          *reinterpret_cast<uint32_t*>(dxr + p) = mma::pack_bf16x2(v[0], v[1]);
        } else {
          dxr[p] = from_f32<bf16_t>(v[0]);
          if (p + 1 < P) dxr[p + 1] = from_f32<bf16_t>(v[1]);
        }
      }
    }
  });
  __syncthreads();
  // Per step j: ddt (partial) and dcum (all but the last step's chunk-wide terms). Four threads
  // (a quad) per step, each summing every fourth term, combined by quad shuffles.
  for (int j0 = 0; j0 < L; j0 += kThreads / 4) {
    const int j = j0 + int(threadIdx.x) / 4, q = int(threadIdx.x) % 4;
    float dw = 0.0f, col = 0.0f, row = 0.0f;
    if (j < L) {
      for (int p = q; p < P; p += 4) dw += to_f32(xs[j * sP + p]) * GB[j * (P + 1) + p];
      for (int i = j + q; i < L; i += 4) col += Tm[i * (Q + 1) + j];
      for (int i = q; i <= j; i += 4) row += Tm[j * (Q + 1) + i] * dts[i];
    }
    dw = subwarp_sum(dw, 4);
    col = subwarp_sum(col, 4);
    row = subwarp_sum(row, 4);
    if (j < L && q == 0) {
      const int64_t t = ch.t0 + j;
      ddt[(ch.b * k.T + t) * k.H + ch.h] = col + expf(cm[L - 1] - cm[j]) * dw;
      wdw[j] = wv[j] * dw;
      dcum[ch.bh * k.T + t] = row - dts[j] * col - wv[j] * dw;
    }
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // warp 0: the chunk-wide terms of the last step's dcum
    float part = 0.0f;
    for (int j = int(threadIdx.x); j < L; j += 32) part += wdw[j];
    const float total = warp_sum(part) + expf(cm[L - 1]) * gs;
    if (threadIdx.x == 0) {
      dcum[ch.bh * k.T + ch.t0 + L - 1] += total;
      partials[(ch.b * k.nc + ch.c) * 2 * k.H + k.H + ch.h] = dd;
    }
  }
}

// The span path's dx kernel with its reductions in registers. Same outputs, inputs and products
// as dx_tc_kernel (which has the per-chunk path's f32 states); what moved:
//   * Tm = dM o KE (f32, j <= i) is never stored. In the KE epilogue each thread holds Tm for its
//     fragment rows r (g, g + 8) and columns c; it forms
//       row_r partial = sum_c Tm_rc dt_c     (quad shuffles: the 4 lanes of a row)
//       col_c partial = sum_r Tm_rc          (shuffles over g: the 8 lanes of a column)
//     and writes one f32 per (row, 32-column tile) and per (16-row tile, column) to shared
//     memory: row_j = sum over the column tiles, col_j = sum over the row tiles (fixed order).
//     Tiles entirely above the diagonal write zero partials and no KE (never read: the KE^T dy
//     product of the 16 columns at m0 reads rows >= m0 only).
//   * GB = G B_j is never stored: dw_j = x_j . (G B_j) is summed in the dx epilogue from the gb
//     fragments and x pairs read as 4-byte bf16 pairs (quad shuffles, one partial per
//     (row, 32-column tile)); the same epilogue sums dy . x for dD (a warp sum, one value per
//     warp), which drops dx_tc_kernel's block-wide tile_dot and its two barriers.
//   * The per-step tail (ddt_j = col_j + exp(cum_L - cum_j) dw_j, dcum_j = row_j - dt_j col_j
//     - w_j dw_j, dcum_L += sum_j w_j dw_j) is one warp: lanes own steps, the chunk-wide sum is a
//     warp sum: no quad loops over Q, no extra barrier.
//   * G has no buffer of its own: it is copied (cp.async) into C's tile once the KE products are
//     done, while each warp runs its first KE^T dy product; then a barrier and the G B_j
//     product. Shared memory at Q = 64, P = 64, N = 128: 63.5 KiB (dx_tc_kernel on bf16 states,
//     with G in a buffer of its own, took 111.5),
//     so three blocks a SM where the registers allow (the full-chunk variant: <= 80 a thread).
// Four barriers in all (rows in; KE and the partials; G in; the dx partials). Sums differ from
// dx_tc_kernel's in f32 rounding order only.
template <class Sh>
constexpr int dx_reg_blocks = Sh::full ? 3 : 2;  // blocks a SM that __launch_bounds__ asks for

template <class Sh>
__global__ void __launch_bounds__(kThreads, dx_reg_blocks<Sh>)
    dx_reg_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                  const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                  const float* __restrict__ D, const bf16_t* __restrict__ dy,
                  const float* __restrict__ cum, const bf16_t* __restrict__ grads,
                  bf16_t* __restrict__ dx, float* __restrict__ ddt, float* __restrict__ dcum,
                  float* __restrict__ partials) {
  extern __shared__ uint4 smem_raw[];
  __shared__ float red[kThreads / 32];
  const Chunk ch = chunk_of_block<Sh>(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  const int Qp = pad16(Q), Q32 = (Qp + 31) / 32 * 32, nq = Q32 / 32, np = (pad16(P) + 31) / 32;
  const DxTiles tiles(reinterpret_cast<unsigned char*>(smem_raw), Q, P, N);
  bf16_t *const Cs = tiles.CG, *const Gt = tiles.CG;  // C's rows, then G as [P][N]
  bf16_t *const Bs = tiles.Bs, *const xs = tiles.xs, *const dys = tiles.dys, *const KE = tiles.KE;
  float* cm = reinterpret_cast<float*>(tiles.rest);  // [Qp], zero past the chunk
  float* dts = cm + Qp;                              // [Qp], zero past the chunk
  float* rowp = dts + Qp;                            // [Qp][nq]
  float* colp = rowp + Qp * nq;                      // [Qp / 16][Q32]
  float* dwp = colp + (Qp / 16) * Q32;               // [Qp][np]
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  tiles.load(k, ch, Cm, Bm, x, dy);
  mma::cp_async_commit();
  for (int i = threadIdx.x; i < Qp; i += blockDim.x) {
    const bool in = i < L;
    cm[i] = in ? cum[ch.bh * k.T + ch.t0 + i] : 0.0f;
    dts[i] = in ? dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h] : 0.0f;
  }
  mma::cp_async_wait<0>();
  __syncthreads();
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  // KE = K E (bf16, zero off j <= i and in the padding); the Tm row and column partials.
  tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
    WarpTile<1, 2> ke(m0, n0, Lp, Lp), dm(m0, n0, Lp, Lp);
    float rs[2] = {0.0f, 0.0f}, cs[4][2];
    if (n0 <= m0 + 15) {  // else all above the diagonal: zero partials, KE never read there
      ke.mac<false, false>(Cs, sN, Bs, sN, 0, Np);
      dm.mac<false, false>(dys, sP, xs, sP, 0, Pp);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c0 = ke.col(j, 0);
        if (c0 >= Lp) {  // (c0 even, Lp even: c0 + 1 < Lp otherwise)
          cs[j][0] = cs[j][1] = 0.0f;
          continue;
        }
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = ke.row(0, e), c = c0 + (e & 1);
          v[e] = c <= r && r < L ? ke.c[0][j][e] * mma::exp2_approx((cm[r] - cm[c]) * kLog2e)
                                 : 0.0f;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = ke.row(0, 2 * h);
          *reinterpret_cast<uint32_t*>(KE + r * sQ + c0) = mma::pack_bf16x2(v[2 * h], v[2 * h + 1]);
        }
        const float d0 = dts[c0], d1 = dts[c0 + 1];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] *= dm.c[0][j][e];  // Tm (zero off j <= i < L)
        rs[0] += v[0] * d0 + v[1] * d1;
        rs[1] += v[2] * d0 + v[3] * d1;
        cs[j][0] = v[0] + v[2];
        cs[j][1] = v[1] + v[3];
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) cs[j][0] = cs[j][1] = 0.0f;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float s = subwarp_sum(rs[h], 4);
      if (lane % 4 == 0) rowp[ke.row(0, 2 * h) * nq + n0 / 32] = s;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        float s = cs[j][q];
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane < 4) colp[(m0 / 16) * Q32 + ke.col(j, q)] = s;
      }
  });
  __syncthreads();
  const float d = D[ch.h];
  bf16_t* dxc = dx + ((ch.b * k.T + ch.t0) * k.H + ch.h) * P;
  const bool pairs = P % 2 == 0;  // dx rows start 4-byte aligned: stores by bf16 pairs
  float dd = 0.0f;                // this thread's part of sum dy . x (dD)
  tc::load_tile_async(Gt, sN, grads + state_at, P, N);  // into C's tile: C is done
  mma::cp_async_commit();
  // The warp tiles of the Lp x Pp output in rounds of kWarps (the same count in every warp, so
  // that the first round's barrier, G in, is uniform).
  const int tn = (Pp + 31) / 32, ntiles = (Lp / 16) * tn;
  for (int round = 0; round * tc::kWarps < ntiles; ++round) {
    const int t = warp + round * tc::kWarps;
    const bool live = t < ntiles;
    const int m0 = live ? (t / tn) * 16 : 0, n0 = live ? (t % tn) * 32 : 0;
    WarpTile<1, 2> gb(m0, n0, Lp, Pp), acc(m0, n0, Lp, Pp);
    if (live) acc.mac<true, true>(KE, sQ, dys, sP, m0, Lp);  // sum_{i >= j} KE_ij dy_ip
    if (round == 0) {
      mma::cp_async_wait<0>();
      __syncthreads();  // G in
    }
    if (!live) continue;
    gb.mac<false, false>(Bs, sN, Gt, sN, 0, Np);  // (G B_j)_p = sum_n B_jn G_pn
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the fragments
      const int r = gb.row(0, 2 * h);
      const float dr = dts[r], wr = mma::exp2_approx((cm[L - 1] - cm[r]) * kLog2e) * dr;
      bf16_t* dxr = dxc + int64_t(r) * k.H * P;
      float dw = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int p = gb.col(j, 2 * h);  // even: P even and p < P imply p + 1 < P
        if (p >= Pp) continue;
        // x and dy at (r, p), (r, p + 1) as 4-byte pairs (zeros in the padding).
        const uint32_t xp = *reinterpret_cast<const uint32_t*>(xs + r * sP + p);
        const uint32_t yp = *reinterpret_cast<const uint32_t*>(dys + r * sP + p);
        const uint32_t xu[2] = {xp << 16, xp & 0xffff0000u}, yu[2] = {yp << 16, yp & 0xffff0000u};
        float v[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          float xv, yv;
          memcpy(&xv, &xu[q], 4);
          memcpy(&yv, &yu[q], 4);
          const float gv = gb.c[0][j][2 * h + q], av = acc.c[0][j][2 * h + q];
          dw += xv * gv;
          dd += yv * xv;
          v[q] = d * yv + dr * av + wr * gv;
        }
        if (r >= L || p >= P) continue;
        if (pairs) {
          *reinterpret_cast<uint32_t*>(dxr + p) = mma::pack_bf16x2(v[0], v[1]);
        } else {
          dxr[p] = from_f32<bf16_t>(v[0]);
          if (p + 1 < P) dxr[p + 1] = from_f32<bf16_t>(v[1]);
        }
      }
      dw = subwarp_sum(dw, 4);
      if (lane % 4 == 0) dwp[r * np + n0 / 32] = dw;
    }
  }
  dd = warp_sum(dd);
  if (lane == 0) red[warp] = dd;
  __syncthreads();
  if (warp == 0) {  // the per-step tail: lanes own steps
    const float last = cm[L - 1];
    float part = 0.0f, mine = 0.0f;  // sum of w_j dw_j; the last step's dcum (its owner)
    for (int j = lane; j < L; j += 32) {
      float col = 0.0f, row = 0.0f, dw = 0.0f;
      for (int m = 0; m < Lp / 16; ++m) col += colp[m * Q32 + j];
      for (int q = 0; q < (Lp + 31) / 32; ++q) row += rowp[j * nq + q];  // tiles written
      for (int q = 0; q < np; ++q) dw += dwp[j * np + q];
      const float e = expf(last - cm[j]), wdw = e * dts[j] * dw;
      const int64_t t = ch.t0 + j;
      ddt[(ch.b * k.T + t) * k.H + ch.h] = col + e * dw;
      part += wdw;
      const float dc = row - dts[j] * col - wdw;
      if (j == L - 1) {
        mine = dc;
      } else {
        dcum[ch.bh * k.T + t] = dc;
      }
    }
    const float total = warp_sum(part);
    if (lane == (L - 1) % 32) dcum[ch.bh * k.T + ch.t0 + L - 1] = mine + total;
    if (lane == 0) {
      float s = 0.0f;
      for (int w = 0; w < kThreads / 32; ++w) s += red[w];
      partials[(ch.b * k.nc + ch.c) * 2 * k.H + k.H + ch.h] = s;
    }
  }
}
int64_t dx_reg_smem(const Dims& k) {
  const int64_t Qp = pad16(int(k.Q)), Q32 = (Qp + 31) / 32 * 32;
  const int64_t nq = Q32 / 32, np = (pad16(int(k.P)) + 31) / 32;
  const int64_t qp = k.Q > k.P ? k.Q : k.P;
  return tile_bytes(qp, k.N) + tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) +
         tile_bytes(k.Q, k.Q) + 4 * (2 * Qp + Qp * nq + (Qp / 16) * Q32 + Qp * np);
}

// Per-head dB, dC of one chunk ([B,T,H,N], f32 or bf16 as S) and the carried state's dcum term
// (see dbc_kernel); with bf16 states (S = bf16_t, the span path) also the state passing's
// dcum_last term exp(cum_last) <G, S_c> (dx_tc_kernel adds it on the per-chunk path).
template <class S, class Sh>
__global__ void __launch_bounds__(kThreads)
    dbc_tc_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                  const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                  const bf16_t* __restrict__ dy, const float* __restrict__ cum,
                  const S* __restrict__ states, const S* __restrict__ grads,
                  S* __restrict__ dBh, S* __restrict__ dCh, float* __restrict__ dcum) {
  extern __shared__ uint4 smem_raw[];
  __shared__ float red[32];
  const Chunk ch = chunk_of_block<Sh>(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  const int nparts = (Np + 31) / 32;  // warp tiles across N (32 columns each)
  unsigned char* at = reinterpret_cast<unsigned char*>(smem_raw);
  bf16_t* Cs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* Bs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* xs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* dys = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* A2 = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, Q);
  bf16_t* SG = reinterpret_cast<bf16_t*>(at);  // S_c, then G, as [P][N]
  at += tile_bytes(P, N);
  float* part = reinterpret_cast<float*>(at);  // [pad16(Q)][nparts]
  float* cm = part + pad16(Q) * nparts;
  float* dts = cm + Q;
  float* wv = dts + Q;
  // The G tile: S_c's, loaded once the S products are done (f32 states), or its own, copied in
  // with the rows (bf16 states).
  bf16_t* Gt = SG;
  tc::load_rows_async(Cs, sN, Cm, ch.b, ch.g, ch.t0, L, k.T, k.G, N);
  tc::load_rows_async(Bs, sN, Bm, ch.b, ch.g, ch.t0, L, k.T, k.G, N);
  tc::load_rows_async(xs, sP, x, ch.b, ch.h, ch.t0, L, k.T, k.H, P);
  tc::load_rows_async(dys, sP, dy, ch.b, ch.h, ch.t0, L, k.T, k.H, P);
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  if constexpr (std::is_same_v<S, float>) {
    tc::load_state_bf16(SG, sN, states + state_at, P, N, nullptr);
  } else {
    tc::load_tile_async(SG, sN, states + state_at, P, N);
    Gt = reinterpret_cast<bf16_t*>(reinterpret_cast<unsigned char*>(smem_raw) + dbc_g_offset(k));
    tc::load_tile_async(Gt, sN, grads + state_at, P, N);
  }
  mma::cp_async_commit();
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  mma::cp_async_wait<0>();
  __syncthreads();
  for (int j = threadIdx.x; j < L; j += blockDim.x) wv[j] = expf(cm[L - 1] - cm[j]) * dts[j];
  // A2 = dM E dt on j <= i (bf16, zero elsewhere and in the padding).
  tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
    WarpTile<1, 2> dm(m0, n0, Lp, Lp);
    if (n0 <= m0 + 15) dm.mac<false, false>(dys, sP, xs, sP, 0, Pp);  // dM_ij = dy_i . x_j
    dm.each([&](int i, int j, float& v) {
      const float a =
          j <= i && i < L ? v * mma::exp2_approx((cm[i] - cm[j]) * kLog2e) * dts[j] : 0.0f;
      A2[i * sQ + j] = from_f32<bf16_t>(a);
    });
  });
  __syncthreads();
  const int64_t row0 = (ch.b * k.T + ch.t0) * k.H + ch.h;  // [B,T,H,N] row of step t0
  tc::for_warp_tiles<2, 2>(Lp, Np, [&](int m0, int n0) {
    WarpTile<2, 2> t(m0, n0, Lp, Np);
    t.mac<false, true>(dys, sP, SG, sN, 0, Pp);  // (S^T dy_i)_n = sum_p dy_ip S_pn
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the fragment
        const int r = t.row(i, 2 * h);
        const float e = expf(cm[r < L ? r : L - 1]);
        float dot = 0.0f;  // this lane's columns of C_r . (exp(cum_r) S^T dy_r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            float& v = t.c[i][j][2 * h + q];
            v *= e;
            const int c = t.col(j, 2 * h + q);  // (the stride's padding is never written)
            if (r < Lp && c < Np) dot += v * to_f32(Cs[r * sN + c]);
          }
        dot = subwarp_sum(dot, 4);  // the quad holds the row's 32 columns
        if (r < Lp && threadIdx.x % 4 == 0) part[r * nparts + n0 / 32] = dot;
      }
    t.mac<false, true>(A2, sQ, Bs, sN, 0, m0 + 32 < Lp ? m0 + 32 : Lp);  // sum_{j <= i} A2_ij B_j
    t.each([&](int i, int n, float& v) {
      if (i < L && n < N) dCh[(row0 + int64_t(i) * k.H) * N + n] = from_f32<S>(v);
    });
  });
  __syncthreads();
  float gs = 0.0f;  // <G_{c+1}, S_c> on the span path
  if constexpr (std::is_same_v<S, float>) {
    tc::load_state_bf16(SG, sN, grads + state_at, P, N, nullptr);  // G_{c+1} replaces S_c
    __syncthreads();
  } else {
    gs = block_sum(tc::tile_dot_bf16(SG, Gt, sN, P, N), red);
  }
  tc::for_warp_tiles<2, 2>(Lp, Np, [&](int m0, int n0) {
    WarpTile<2, 2> t(m0, n0, Lp, Np);
    t.mac<false, true>(xs, sP, Gt, sN, 0, Pp);  // (G^T x_j)_n = sum_p x_jp G_pn
    t.each([&](int j, int, float& v) { v *= wv[j < L ? j : L - 1]; });
    t.mac<true, true>(A2, sQ, Cs, sN, m0, Lp);  // sum_{i >= j} A2_ij C_i
    t.each([&](int j, int n, float& v) {
      if (j < L && n < N) dBh[(row0 + int64_t(j) * k.H) * N + n] = from_f32<S>(v);
    });
  });
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    float s = 0.0f;
    for (int q = 0; q < nparts; ++q) s += part[i * nparts + q];
    if (!std::is_same_v<S, float> && i == L - 1) s += expf(cm[L - 1]) * gs;
    dcum[ch.bh * k.T + ch.t0 + i] += s;
  }
}

// The span path's dB, dC summed over a split of a group's heads inside the block (instead of
// per-head values summed afterwards): one block per (chunk, b, g, split of kHeadsPerSplit heads),
// the group's B, C rows loaded once, the dB and dC tiles of the chunk (Q x N) accumulated in f32
// registers (one 32 x 32 warp tile of each per warp: needs state_fits(Q, N)) over the heads:
//   dC += diag(e_h) dy_h S_h + A2_h B        dB += diag(w_h) x_h G_h + A2_h^T C
// with the row scalings applied to the bf16 A fragments (mac_scaled_a). Per head, as
// dbc_tc_kernel: dcum_i += C_i . (e_i S_h^T dy_i), taken as the change of C_i . dC_i across the
// head's carried term (f32; the previous heads' part cancels exactly up to rounding), and
// dcum_last += exp(cum_last) <G_h, S_h>. Writes partials [B, T, G, nsplit, N] f32.
// <G_h, S_h> is summed as per-warp sums read after the barrier that already ends the head (one
// barrier a head less than block_sum's two), and the A2 tile stored as 4-byte bf16 pairs (no
// per-element predicates and 2-byte stores): dbc 615 us against 654 for the kernel that did
// neither (RESULTS.md, 2026-12-02; AMOR_SSD_BWD=tile selected it until session 7), the same bits.
constexpr int kHeadsPerSplit = 8;

template <class Sh>
__global__ void __launch_bounds__(kThreads, 2)
    dbc_heads_tc_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                        const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                        const bf16_t* __restrict__ dy, const float* __restrict__ cum,
                        const bf16_t* __restrict__ states, const bf16_t* __restrict__ grads,
                        float* __restrict__ dBp, float* __restrict__ dCp,
                        float* __restrict__ dcum) {
  extern __shared__ uint4 smem_raw[];
  __shared__ float red[32];
  Sh::fix(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N);
  const int G = int(k.G), by = int(blockIdx.y), b32 = by / G;  // 32-bit divisions
  const int64_t c = blockIdx.x, b = b32, g = by - b32 * G, sp = blockIdx.z;
  const int64_t hpg = int(k.H) / G, nsplit = (hpg + kHeadsPerSplit - 1) / kHeadsPerSplit;
  const int64_t h0 = g * hpg + sp * kHeadsPerSplit;
  const int64_t h1 = h0 + kHeadsPerSplit < (g + 1) * hpg ? h0 + kHeadsPerSplit : (g + 1) * hpg;
  const int64_t t0 = c * k.Q;
  const int L = Sh::len(k, t0);
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  const int nparts = (Np + 31) / 32;
  unsigned char* at = reinterpret_cast<unsigned char*>(smem_raw);
  bf16_t* Cs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* Bs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* xs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* dys = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* A2 = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, Q);
  bf16_t* Ss = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(P, N);
  bf16_t* Gs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(P, N);
  float* part = reinterpret_cast<float*>(at);  // [pad16(Q)][nparts]
  float* cm = part + pad16(Q) * nparts;
  float* dts = cm + pad16(Q);
  float* ev = dts + pad16(Q);   // exp(cum_i), zero past the chunk
  float* wv = ev + pad16(Q);    // exp(cum_last - cum_j) dt_j, zero past the chunk
  float* dc0 = wv + pad16(Q);   // dcum as the dx kernel left it
  bool live;
  WarpTile<2, 2> aC = tc::state_tile(Q, N, live), aB = aC;  // tiles of the Lp x Np outputs
  aC.M = aB.M = Lp;  // rows past the chunk's padded length are skipped
  tc::load_rows_async(Cs, sN, Cm, b, g, t0, L, k.T, k.G, N);
  tc::load_rows_async(Bs, sN, Bm, b, g, t0, L, k.T, k.G, N);
  mma::cp_async_commit();
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t bh = b * k.H + h, state_at = (bh * k.nc + c) * int64_t(P) * N;
    tc::load_rows_async(xs, sP, x, b, h, t0, L, k.T, k.H, P);
    tc::load_rows_async(dys, sP, dy, b, h, t0, L, k.T, k.H, P);
    tc::load_tile_async(Ss, sN, states + state_at, P, N);
    tc::load_tile_async(Gs, sN, grads + state_at, P, N);
    // The per-step scalars and the dcum to add to come with the tiles (zeros past the chunk),
    // so that no thread waits on a global load of its own.
    for (int i = threadIdx.x; i < pad16(Q); i += blockDim.x) {
      const bool in = i < L;
      const int64_t t = t0 + (in ? i : 0);
      mma::cp_async_4(cm + i, cum + bh * k.T + t, in);
      mma::cp_async_4(dts + i, dt + (b * k.T + t) * k.H + h, in);
      mma::cp_async_4(dc0 + i, dcum + bh * k.T + t, in);
    }
    mma::cp_async_commit();
    mma::cp_async_wait<0>();
    __syncthreads();
    for (int i = threadIdx.x; i < pad16(Q); i += blockDim.x) {  // read after block_sum's barrier
      const bool in = i < L;
      ev[i] = in ? expf(cm[i]) : 0.0f;
      wv[i] = in ? expf(cm[L - 1] - cm[i]) * dts[i] : 0.0f;
    }
    // A2 = dM E dt on j <= i (bf16, zero elsewhere and in the padding), as dbc_tc_kernel.
    tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
      WarpTile<1, 2> dm(m0, n0, Lp, Lp);
      if (n0 <= m0 + 15) dm.mac<false, false>(dys, sP, xs, sP, 0, Pp);  // dM_ij = dy_i . x_j
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c0 = dm.col(j, 0);  // even; Lp even: c0 < Lp implies c0 + 1 < Lp
        if (c0 >= Lp) continue;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = dm.row(0, 2 * hh);
          float a[2];
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int cc = c0 + q;
            a[q] = cc <= r && r < L ? dm.c[0][j][2 * hh + q] *
                                          mma::exp2_approx((cm[r] - cm[cc]) * kLog2e) * dts[cc]
                                    : 0.0f;
          }
          *reinterpret_cast<uint32_t*>(A2 + r * sQ + c0) = mma::pack_bf16x2(a[0], a[1]);
        }
      }
    });
    // <G_h, S_h>: per-warp sums in red, summed in block_sum's order after the head's closing
    // barrier.
    float gs = 0.0f;
    {
      const float wsum = warp_sum(tc::tile_dot_bf16(Ss, Gs, sN, P, N));
      if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = wsum;
      __syncthreads();  // A2 is complete
    }
    if (live) {
      // This lane's part of C_r . dC_r for its rows r (a fragment's rows g and g + 8).
      auto rowdots = [&](float (&d)[2][2]) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int r = aC.row(i, 2 * hh);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              // Columns cc, cc + 1 (cc even, Np even) as one 4-byte bf16 pair, same sum order.
              const int cc = aC.col(j, 2 * hh);
              if (r < Lp && cc < Np) {
                const uint32_t pr = *reinterpret_cast<const uint32_t*>(Cs + r * sN + cc);
                const uint32_t ulo = pr << 16, uhi = pr & 0xffff0000u;
                float lo, hi;
                memcpy(&lo, &ulo, 4);
                memcpy(&hi, &uhi, 4);
                s += aC.c[i][j][2 * hh] * lo;
                s += aC.c[i][j][2 * hh + 1] * hi;
              }
            }
            d[i][hh] = s;
          }
      };
      float before[2][2], after[2][2];
      rowdots(before);
      tc::mac_scaled_a(aC, dys, sP, [&](int i) { return ev[i]; }, Ss, sN, 0, Pp);
      rowdots(after);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = aC.row(i, 2 * hh);
          const float dot = subwarp_sum(after[i][hh] - before[i][hh], 4);
          if (r < Lp && threadIdx.x % 4 == 0) part[r * nparts + aC.n0 / 32] = dot;
        }
      const int kend = aC.m0 + 32 < Lp ? aC.m0 + 32 : Lp;
      aC.mac<false, true>(A2, sQ, Bs, sN, 0, kend);  // sum_{j <= i} A2_ij B_j
      tc::mac_scaled_a(aB, xs, sP, [&](int j) { return wv[j]; }, Gs, sN, 0, Pp);
      aB.mac<true, true>(A2, sQ, Cs, sN, aB.m0, Lp);  // sum_{i >= j} A2_ij C_i
    }
    __syncthreads();  // part complete; the head's tiles may be replaced after the next barrier
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
      float s = 0.0f;
      for (int q = 0; q < nparts; ++q) s += part[i * nparts + q];
      if (i == L - 1) {
        for (int w = 0; w < kThreads / 32; ++w) gs += red[w];
        s += expf(cm[L - 1]) * gs;
      }
      dcum[bh * k.T + t0 + i] = dc0[i] + s;
    }
    __syncthreads();
  }
  if (live) {
    const int64_t row0 = ((b * k.T + t0) * k.G + g) * nsplit + sp;  // [B,T,G,nsplit,N] row
    aC.each([&](int i, int n, float& v) {
      if (i < L && n < N) dCp[(row0 + int64_t(i) * k.G * nsplit) * N + n] = v;
    });
    aB.each([&](int j, int n, float& v) {
      if (j < L && n < N) dBp[(row0 + int64_t(j) * k.G * nsplit) * N + n] = v;
    });
  }
}

int64_t dx_tc_smem(const Dims& k) {
  const int64_t qp = k.Q > k.P ? k.Q : k.P;
  return tile_bytes(qp, k.N) + tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) +
         tile_bytes(k.Q, k.Q) + 4 * (k.Q * (k.Q + 1) + k.Q * (k.P + 1) + 4 * k.Q);
}
int64_t dbc_tc_smem(const Dims& k) {
  const int64_t nparts = (pad16(int(k.N)) + 31) / 32;
  return 2 * tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) + tile_bytes(k.Q, k.Q) +
         tile_bytes(k.P, k.N) + 4 * (pad16(int(k.Q)) * nparts + 3 * k.Q);
}

}  // namespace

void launch_dx_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                  const bf16_t* Cm, const float* D, const bf16_t* dy, const float* cum,
                  const float* states, const float* grads, bf16_t* dx, float* ddt, float* dcum,
                  float* partials, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  launch_chunks(dx_tc_kernel<AnyShape>, k, dx_tc_smem(k), s, k, x, dt, Bm, Cm, D, dy, cum, states,
                grads, dx, ddt, dcum, partials);
}

void launch_dbc_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                   const bf16_t* Cm, const bf16_t* dy, const float* cum, const float* states,
                   const float* grads, float* dBh, float* dCh, float* dcum, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  launch_chunks(dbc_tc_kernel<float, AnyShape>, k, dbc_tc_smem(k), s, k, x, dt, Bm, Cm, dy, cum, states,
                grads, dBh, dCh, dcum);
}

void launch_dx_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                  const bf16_t* Cm, const float* D, const bf16_t* dy, const float* cum,
                  const bf16_t* grads, bf16_t* dx, float* ddt, float* dcum, float* partials,
                  cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  with_shape(k, [&](auto sh) {
    launch_chunks(dx_reg_kernel<decltype(sh)>, k, dx_reg_smem(k), s, k, x, dt, Bm, Cm, D, dy,
                  cum, grads, dx, ddt, dcum, partials);
  });
}

void launch_dbc_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                   const bf16_t* Cm, const bf16_t* dy, const float* cum, const bf16_t* states,
                   const bf16_t* grads, bf16_t* dBh, bf16_t* dCh, float* dcum, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  with_shape(k, [&](auto sh) {
    launch_chunks(dbc_tc_kernel<bf16_t, decltype(sh)>, k, dbc_spans_smem(k), s, k, x, dt, Bm, Cm,
                  dy, cum, states, grads, dBh, dCh, dcum);
  });
}

int64_t dbc_heads_smem(const Dims& k) {
  const int64_t nparts = (pad16(int(k.N)) + 31) / 32;
  return 2 * tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) + tile_bytes(k.Q, k.Q) +
         2 * tile_bytes(k.P, k.N) + 4 * pad16(int(k.Q)) * (nparts + 5);
}

int64_t dbc_heads_splits(const Dims& k) {
  return (k.H / k.G + kHeadsPerSplit - 1) / kHeadsPerSplit;
}

bool dbc_heads_fit(const Dims& k) {
  return tc::state_fits(int(k.Q), int(k.N)) && dbc_heads_smem(k) <= kSsdMaxSmemBytes;
}

void launch_dbc_heads_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                         const bf16_t* Cm, const bf16_t* dy, const float* cum,
                         const bf16_t* states, const bf16_t* grads, float* dBp, float* dCp,
                         float* dcum, cudaStream_t s) {
  if (k.nc * k.B * k.G == 0) return;
  const int64_t bytes = dbc_heads_smem(k);
  // The full-chunk variant spills (ptxas: 128 bytes at 128 registers); the other does not.
  with_shape<false>(k, [&](auto sh) {
    auto* kernel = dbc_heads_tc_kernel<decltype(sh)>;
    AMOR_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    kernel<<<dim3(unsigned(k.nc), unsigned(k.B * k.G), unsigned(dbc_heads_splits(k))), kThreads,
             size_t(bytes), s>>>(k, x, dt, Bm, Cm, dy, cum, states, grads, dBp, dCp, dcum);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

int64_t backward_spans_smem(const Dims& k) {
  const int64_t a = dx_reg_smem(k), b = dbc_spans_smem(k);
  return a > b ? a : b;
}

int64_t backward_tc_smem(const Dims& k) {
  const int64_t a = dx_tc_smem(k), b = dbc_tc_smem(k);
  return a > b ? a : b;
}

}  // namespace ssd
}  // namespace amor::cuda
