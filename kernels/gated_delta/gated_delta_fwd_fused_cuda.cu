// The gated delta rule's forward in two kernels instead of three (bf16, chunk 64, K 64 or 128,
// V a multiple of 64; the default where it applies, AMOR_GDN_FWD=split keeps the three-kernel
// forward of gated_delta_fwd_cuda.cu).
// This file's fused pass is the first form: launch_fwd_fused hands K 64 (V a multiple of 64) and
// K 128 (V a multiple of 128) to the second form, gated_delta_fwd_fused2_cuda.cu (a warp per 16
// columns of V, no barrier in the state chain), unless AMOR_GDN_FUSED=v1. The chunked WY/UT algorithm (gated_delta_chunked_ref.h):
// per head and chunk of n <= 64 rows with state S [K, V] at its start,
//   gam_r = g_0 + ... + g_r,  e_r = exp(gam_r),  D_rj = exp(gam_r - gam_j),  Tm = (I + A)^-1
//   W = Tm diag(beta e) K,  U = Tm diag(beta) V,  Vn = U - W S
//   O = scale diag(e) Q S + P Vn,   P_rj = scale (q_r . k_j) D_rj (j <= r)
//   S' = e_{n-1} S + K^T diag(D_{n-1,.}) Vn
// W and U are never formed: Vn = Tm diag(beta) (V - diag(e) K S) = Tm X~ with
//   X~ = diag(beta) (V - diag(e) (K S)),
// so the state-dependent part of a chunk is the products K S, Q S (one pass over S), Tm X~,
// P Vn and the state update; the state-independent part is only gam and Tm.
//  1. gdn_prepare_reg_kernel in its Tm-only form (gated_delta_fwd_cuda.cu), all chunks in
//     parallel: gam [BH, T] (f32) and Tm [BH, T, 64] (bf16) from k, g, beta. Its memory: k read,
//     Tm written (the three-kernel forward's prepare also reads v and writes W in bf16 and U in
//     f32: 2.5x the bytes at K 64, V 128). For the second form it also reads q and writes that
//     form's ChunkRows (P, e, dl: gated_delta_fwd_fused.cuh).
//  2. gdn_fwd_fused_kernel, one block per (64 columns of V, head, batch), sequential over the
//     chunks (the columns of S are independent: only rows of S mix). Four warps; warp w takes
//     the chunk's rows m0 = 16 w .. m0 + 15 (all 64 columns: 8 n8 tiles per A fragment) and owns
//     the f32 state rows 16 kb .. 16 kb + 15 (kb = w, w + 4 < K / 16) of the block's columns as
//     MMA accumulators. A bf16 copy of S sits in shared memory as the B operand of every warp's
//     K S and Q S. Per chunk, three phases between three barriers:
//       P1  Y = K_w S; X~ = beta (v - e Y) (f32), rounded to bf16 into the X tile. K 128: also
//           P_w and Q S (see below).
//       P2  Vn_w = Tm_w X~ (Tm lower: k blocks <= w), rounded to bf16 into the Vn tile.
//       P3  O_w = scale diag(e) Q_w S + P_w Vn, stored (4-byte pairs), with P_w = Q_w K^T over
//           the key blocks <= w, masked, decayed and scaled in f32 and rounded to bf16 A
//           fragments (the output_tc kernel's way: no trip through shared memory);
//           S' = e_{n-1} S + (K^T D) Vn: A = K^T (ldmatrix.trans of the k tile) with each
//           fragment column j scaled by D_{n-1,j} (scale_bf16x2), B = Vn; S' in bf16 into an S
//           tile that no warp reads in P3.
//     Where Q S and P go is a matter of registers and shared memory:
//       K 64: in P3 (P key block by key block, each block's fragments straight into
//         O += P_jp Vn_jp), so q is read in P1 and P3 (two q tiles, chunk c + 1's copied during
//         chunk c); S and X take turns in two [64, 64] tiles: S' goes into the tile X occupied
//         (read only in P2), the next X into the old S's (read last in P3). 72.5 KB of shared
//         memory, 168 registers: three blocks per SM.
//       K 128: in P1, P's fragments and Q S held in registers to P3, so q is free after P1 (one
//         q tile, chunk c + 1's copied during P2, P3); one S tile (read only in P1). 96.5 KB,
//         248 registers (242 before the S and Vn stores): two blocks per SM.
//     Copies (cp.async, issued one phase or more ahead): k and gam of chunk c + 1 double-buffered
//     (read in P1 and P3), q as above, Tm single (read in P2 only; chunk c + 1's copied during
//     P3 and P1), v and beta of chunk c + 1 straight into each lane's registers (the elementwise
//     X~ wants them in the C-fragment layout) after P1. So the chain is compute and barriers.
// Work per chunk and block (K 64): K S, Q S and the state update 8 x 4 MMAs per warp each, Tm X~,
// P Q K^T and P Vn 10 x 8, 10 x 8 and 10 x 8 per block: 704 MMAs (the three-kernel forward
// computes W, U and Vn = U - W S besides, and moves S and Vn through memory).
// Memory (bf16, B8 T2K, H24 K64 V128): q, k, Tm read once per 64 columns of V (the blocks of a
// head are neighbours in the grid, so the second read mostly hits L2), v read and o written
// once, no per-chunk state: ~350-500 MB (the three-kernel forward: ~1.3 GB, every chunk's start
// state S and Vn written and read back among them, U in f32).
// The backward's intermediates (a forward with `saved`, and the backward's recomputation:
// gated_delta_fwd_cuda.cu's launch_intermediates; AMOR_GDN_FWD_KEEP=state keeps the earlier way,
// the full prepare and the register state pass besides this pass). The prepare writes gam, W
// and Tm (no v read, no U), and this pass stores each chunk's start state (the bf16 S tile, at
// the start of P2: 16-byte rows, [BH, NC, K, V]) and Vn (the bf16 Vn tile, at the start of P3,
// [BH, T, V]), the layouts of Scratch that the backward reads; the recomputation runs it without
// o (q null: no P, no Q S), which leaves S and Vn the same bits. They differ from the state pass's
// by X~'s bf16 rounding (the state pass rounds W S's operands instead and keeps U in f32): within
// the bf16 tolerance the backward is held to. Extra memory: 2 K V bytes per chunk and 64 columns
// plus 2 V bytes per token and head (H16 K128 V256, B8 T2K: 268 + 134 MB of stores), against
// the full prepare's U (f32, 268 MB written, v read) and the state pass (reads U and W, writes the
// same S and Vn) that it replaces.
// Rounding against the three-kernel forward: X~ is rounded to bf16 where W was (and U kept in
// f32); D scales k (bf16 fragment) instead of Vn; P and the scaling of Q S as the output_tc
// kernel. The emulator measures the same ~3e-3 of the f32 reference as the three kernels.
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_fwd_fused.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda::gdn {
namespace {

constexpr int kFRows = 64;  // the chunk (L = 64)
constexpr int kFBV = 64;    // V columns per block
constexpr int kFWarps = 4;  // warp w: the chunk's rows 16 w .. 16 w + 15
constexpr int kFCols = 64;  // V columns per warp (all of the block's): kNT n8 tiles
constexpr int kNT = kFCols / 8;

// The layout (kPTile: K 128, Q S and P in P1, one q tile; see the top).
template <int K>
struct FusedSmem {
  static constexpr bool kPTile = K > 64;
  static constexpr int ldk = K + 8, ldv = kFBV + 8, ldt = kFRows + 8;  // tile::padded_ld<bf16_t>
  bf16_t *k[2], *q[2], *Tm, *SX[2], *Vn;
  float* gam[2];
  __host__ __device__ FusedSmem(Carve& c, const Dims&) {
    for (int i = 0; i < 2; ++i) k[i] = c.take_as<bf16_t>(kFRows * ldk);
    q[0] = c.take_as<bf16_t>(kFRows * ldk);
    q[1] = kPTile ? q[0] : c.take_as<bf16_t>(kFRows * ldk);
    Tm = c.take_as<bf16_t>(kFRows * ldt);
    constexpr int srows = K > kFRows ? K : kFRows;
    SX[0] = c.take_as<bf16_t>(srows * ldv);  // kPTile: S; else S and X by turns
    SX[1] = c.take_as<bf16_t>(kFRows * ldv);  // kPTile: X
    Vn = c.take_as<bf16_t>(kFRows * ldv);
    for (int i = 0; i < 2; ++i) gam[i] = c.take_as<float>(kFRows);
  }
};

template <int K>
__global__ void __launch_bounds__(kFWarps * 32, K > 64 ? 2 : 3)
    gdn_fwd_fused_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                         const bf16_t* __restrict__ v, const void* beta_in, bool gate_f32,
                         const float* __restrict__ gam, const bf16_t* __restrict__ Tm,
                         const void* s0, bool state_f32, float scale, Dims d,
                         float* __restrict__ s_final, bf16_t* __restrict__ o,
                         bf16_t* __restrict__ S_out, bf16_t* __restrict__ Vn_out) {
  static_assert(K <= 64 || K == 128, "K <= 64: S shares X's [64, *] tiles");
  using Sm = FusedSmem<K>;
  constexpr bool kPTile = Sm::kPTile;
  constexpr int KS = K / 16;        // k16 steps over K, and S's 16-row blocks
  constexpr int KB = (KS + 3) / 4;  // S row blocks per warp: kb = rb + 4 i
  constexpr int ldk = Sm::ldk, ldv = Sm::ldv, ldt = Sm::ldt;
  extern __shared__ float smem[];
  Carve carve{smem};
  Sm s(carve, d);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  const int rb = warp % 4, m0 = 16 * rb, cw = kFCols * (warp / 4);
  const int r0 = m0 + g, r1 = r0 + 8;  // this lane's rows of the C fragments
  // Sizes as int (T H V, T H K and K V fit: gated_delta.cpp's checks and the presets); offsets
  // into the tensors as int64.
  const int T = int(d.T), H = int(d.H), V = int(d.V), NC = int(d.NC);
  const int bh = int(blockIdx.z) * H + int(blockIdx.y), v0 = int(blockIdx.x) * kFBV;
  const int64_t xb = int64_t(blockIdx.z) * T * H + blockIdx.y;  // token row of (b, t 0, h)
  const int64_t KV = int64_t(K) * V;
  // Without o (the backward's recomputation of S and Vn): no q, no P, no Q S.
  const bool with_o = o != nullptr;
  auto rows_of = [&](int c) { return T - c * kFRows < kFRows ? T - c * kFRows : kFRows; };
  // Chunk c's k and gam (and q when with_q) into buffer buf, rows past the chunk zero.
  auto load_kq = [&](int c, int buf, bool with_q) {
    const int64_t x0 = xb + int64_t(c) * kFRows * H;
    const int n = rows_of(c);
    tile_load_zfill(k + x0 * K, H * K, n, kFRows, K, pick(s.k, buf), ldk);
    if (with_q) tile_load_zfill(q + x0 * K, H * K, n, kFRows, K, pick(s.q, buf), ldk);
    vec_load_zfill(gam + int64_t(bh) * T + c * kFRows, n, kFRows, pick(s.gam, buf));
  };
  auto load_tm = [&](int c) {
    tile_load_zfill(Tm + (int64_t(bh) * T + c * kFRows) * kFRows, kFRows, rows_of(c), kFRows,
                    kFRows, s.Tm, ldt);
  };
  // This lane's v (bf16 pairs: rows r0, r1, columns cw + 8 j + 2 t, + 1) and beta of chunk c.
  uint32_t vr[kNT][2];
  float br[2];
  auto load_v = [&](int c) {
    const int n = rows_of(c);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = hh ? r1 : r0;
      const bool in = r < n;
      const int64_t x = xb + int64_t(c * kFRows + (in ? r : 0)) * H;
      br[hh] = in ? load_any(beta_in, x, gate_f32) : 0.0f;
      const bf16_t* vp = v + x * V + v0 + cw + 2 * t;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
        vr[j][hh] = in ? *reinterpret_cast<const uint32_t*>(vp + 8 * j) : 0u;
    }
  };
  // P_w's key block jp (jp <= rb): [16, 16] = Q_w K_jp^T masked (j <= r < n), decayed and scaled
  // in f32, rounded to bf16 pairs: x[h2] the n8 tile h2 (columns 16 jp + 8 h2 ..) as packed rows
  // r0 (x[h2][0]) and r1 (x[h2][1]).
  auto p_block = [&](const bf16_t* qt, const bf16_t* kt, const float* gm, int n, int jp,
                     uint32_t (&x)[2][2]) {
    float p[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[4], b[4];
      tile::frag_a(a, qt, ldk, m0, 16 * kk, lane);
      tile::frag_b2(b, kt, ldk, 16 * kk, 16 * jp, lane);
      tile::mma_x2(p[0], p[1], a, b);
    }
    const float g0 = gm[r0], g1 = gm[r1];
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      float y[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = 16 * jp + 8 * h2 + 2 * t + e % 2, r = e < 2 ? r0 : r1;
        const float gr = e < 2 ? g0 : g1;
        y[e] = j <= r && r < n ? scale * p[h2][e] * exp_t<bf16_t>(gr - gm[j]) : 0.0f;
      }
      x[h2][0] = mma::pack_bf16x2(y[0], y[1]);
      x[h2][1] = mma::pack_bf16x2(y[2], y[3]);
    }
  };
  // ot = scale diag(e) Q_w S (the output's first term).
  auto q_times_s = [&](const bf16_t* qt, const bf16_t* St, const float* gm, float (&ot)[kNT][4]) {
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) ot[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[4];
      tile::frag_a(a, qt, ldk, m0, 16 * kk, lane);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        uint32_t b[4];
        tile::frag_b2_trans(b, St, ldv, 16 * kk, cw + 16 * np, lane);
        tile::mma_x2(ot[2 * np], ot[2 * np + 1], a, b);
      }
    }
    const float se0 = scale * exp_t<bf16_t>(gm[r0]), se1 = scale * exp_t<bf16_t>(gm[r1]);
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      ot[j][0] *= se0;
      ot[j][1] *= se0;
      ot[j][2] *= se1;
      ot[j][3] *= se1;
    }
  };
  // ot += A Vn_jp (A: the k step of keys 16 jp ..).
  auto add_p_vn = [&](const uint32_t (&a)[4], int jp, float (&ot)[kNT][4]) {
#pragma unroll
    for (int np = 0; np < kNT / 2; ++np) {
      uint32_t b[4];
      tile::frag_b2_trans(b, s.Vn, ldv, 16 * jp, cw + 16 * np, lane);
      tile::mma_x2(ot[2 * np], ot[2 * np + 1], a, b);
    }
  };
  // The warp's state rows into an S tile (bf16).
  float st[KB][kNT][4];  // st[i][j][e] = S[16 (rb + 4 i) + g + 8 (e / 2)][cw + 8 j + 2 t + e % 2]
  auto put_state = [&](bf16_t* St) {
#pragma unroll
    for (int i = 0; i < KB; ++i) {
      const int kb = rb + 4 * i;
      if (kb >= KS) break;
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        bf16_t* at = St + (16 * kb + g) * ldv + cw + 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(at) = mma::pack_bf16x2(st[i][j][0], st[i][j][1]);
        *reinterpret_cast<uint32_t*>(at + 8 * ldv) = mma::pack_bf16x2(st[i][j][2], st[i][j][3]);
      }
    }
  };

  // rows x the block's 64 columns of a [*, ldv] tile to dst (row stride ld), 16 bytes a copy.
  auto tile_out = [&](const bf16_t* tile, int rows, bf16_t* dst, int64_t ld) {
    for (int e = int(threadIdx.x); e < rows * (kFBV / 8); e += kFWarps * 32) {
      const int r = e / (kFBV / 8), c8 = 8 * (e % (kFBV / 8));
      *reinterpret_cast<uint4*>(dst + r * ld + c8) =
          *reinterpret_cast<const uint4*>(tile + r * ldv + c8);
    }
  };

  // Copy groups, in order: per chunk c, G_c (k, gam and, K 64, q of chunk c + 1) after the first
  // barrier, Q_c (K 128: q of chunk c + 1; else empty) after the second, T_c (Tm of chunk c + 1)
  // after the third. Before the first barrier of chunk c everything but T_{c-1} has landed
  // (wait<1>); before the second, T_{c-1} too (only G_c may be in flight: wait<1>).
  load_kq(0, 0, with_o);
  tile_commit();
  tile_commit();
  load_tm(0);
  tile_commit();
  load_v(0);
#pragma unroll
  for (int i = 0; i < KB; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int kb = rb + 4 * i;
        const int64_t at =
            int64_t(bh) * KV + (16 * kb + g + 8 * (e / 2)) * V + v0 + cw + 8 * j + 2 * t + e % 2;
        st[i][j][e] = s0 && kb < KS ? load_any(s0, at, state_f32) : 0.0f;
      }
  put_state(s.SX[0]);

  bf16_t* const o_b = with_o ? o + xb * V + v0 + cw + 2 * t : nullptr;
  for (int c = 0; c < NC; ++c) {
    const int n = rows_of(c), buf = int(c & 1);
    const bf16_t *kt = pick(s.k, buf), *qt = pick(s.q, buf);
    const float* gm = pick(s.gam, buf);
    // This chunk's S and X tiles (K 64: by turns; the next S goes where X is now).
    bf16_t* const St = kPTile ? s.SX[0] : pick(s.SX, buf);
    bf16_t* const Xt = kPTile ? s.SX[1] : pick(s.SX, buf ^ 1);
    tile_wait<1>();
    __syncthreads();  // chunk c's k, q, gam and S visible; chunk c - 1's buffers free
    if (c + 1 < NC) load_kq(c + 1, buf ^ 1, !kPTile && with_o);
    tile_commit();

    // P1: Y = K_w S; X~ = beta (v - e Y) into X. K 128: also P_w and Q S.
    float ot[kNT][4];
    uint32_t pa[kPTile ? 4 : 1][4];  // K 128: P_w's A fragments (key blocks <= rb), P1 to P3
    if constexpr (kPTile) {
      if (with_o) {
#pragma unroll
        for (int jp = 0; jp < 4; ++jp) {
          if (jp > rb) break;
          uint32_t x[2][2];
          p_block(qt, kt, gm, n, jp, x);
          pa[jp][0] = x[0][0];
          pa[jp][1] = x[0][1];
          pa[jp][2] = x[1][0];
          pa[jp][3] = x[1][1];
        }
        q_times_s(qt, St, gm, ot);
      }
    }
    {
      float y[kNT][4] = {};
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t a[4];
        tile::frag_a(a, kt, ldk, m0, 16 * kk, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          uint32_t b[4];
          tile::frag_b2_trans(b, St, ldv, 16 * kk, cw + 16 * np, lane);
          tile::mma_x2(y[2 * np], y[2 * np + 1], a, b);
        }
      }
      const float e0 = exp_t<bf16_t>(gm[r0]), e1 = exp_t<bf16_t>(gm[r1]);
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        bf16_t* at = Xt + r0 * ldv + cw + 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(at) =
            mma::pack_bf16x2(br[0] * (bf_lo(vr[j][0]) - e0 * y[j][0]),
                             br[0] * (bf_hi(vr[j][0]) - e0 * y[j][1]));
        *reinterpret_cast<uint32_t*>(at + 8 * ldv) =
            mma::pack_bf16x2(br[1] * (bf_lo(vr[j][1]) - e1 * y[j][2]),
                             br[1] * (bf_hi(vr[j][1]) - e1 * y[j][3]));
      }
    }
    if (c + 1 < NC) load_v(c + 1);  // in flight until the next chunk's P1
    tile_wait<1>();
    __syncthreads();  // X~ (and P) complete, Tm landed; K 128: S and q no longer read
    if constexpr (kPTile) {
      if (with_o && c + 1 < NC) {
        const int64_t x0 = xb + int64_t(c + 1) * kFRows * H;
        tile_load_zfill(q + x0 * K, H * K, rows_of(c + 1), kFRows, K, s.q[0], ldk);
      }
    }
    tile_commit();
    // The chunk's start state (bf16, as the S tile holds it) for the backward: the S tile is
    // rewritten only after the next barrier.
    if (S_out) tile_out(St, K, S_out + (int64_t(bh) * NC + c) * KV + v0, V);

    // P2: Vn_w = Tm_w X~ into Vn.
    {
      float vn[kNT][4] = {};
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) {
        if (kb > rb) break;
        uint32_t a[4];
        tile::frag_a(a, s.Tm, ldt, m0, 16 * kb, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          uint32_t b[4];
          tile::frag_b2_trans(b, Xt, ldv, 16 * kb, cw + 16 * np, lane);
          tile::mma_x2(vn[2 * np], vn[2 * np + 1], a, b);
        }
      }
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        bf16_t* at = s.Vn + r0 * ldv + cw + 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(at) = mma::pack_bf16x2(vn[j][0], vn[j][1]);
        *reinterpret_cast<uint32_t*>(at + 8 * ldv) = mma::pack_bf16x2(vn[j][2], vn[j][3]);
      }
    }
    __syncthreads();  // Vn complete; Tm and X no longer read
    if (c + 1 < NC) load_tm(c + 1);
    tile_commit();

    // Vn for the backward (rewritten only after two more barriers).
    if (Vn_out) tile_out(s.Vn, n, Vn_out + (int64_t(bh) * T + c * kFRows) * V + v0, V);

    // P3: O_w = scale diag(e) Q_w S + P_w Vn; S' = e_{n-1} S + (K^T D) Vn.
    if (with_o) {
      if constexpr (kPTile) {
#pragma unroll
        for (int jp = 0; jp < 4; ++jp) {
          if (jp > rb) break;
          add_p_vn(pa[jp], jp, ot);
        }
      } else {
        q_times_s(qt, St, gm, ot);
#pragma unroll
        for (int jp = 0; jp < 4; ++jp) {
          if (jp > rb) break;
          uint32_t x[2][2];
          p_block(qt, kt, gm, n, jp, x);
          const uint32_t a[4] = {x[0][0], x[0][1], x[1][0], x[1][1]};
          add_p_vn(a, jp, ot);
        }
      }
    }
    if (with_o) {
      bf16_t* const oc = o_b + int64_t(c) * kFRows * H * V;
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        if (r0 < n)
          *reinterpret_cast<uint32_t*>(oc + r0 * H * V + 8 * j) =
              mma::pack_bf16x2(ot[j][0], ot[j][1]);
        if (r1 < n)
          *reinterpret_cast<uint32_t*>(oc + r1 * H * V + 8 * j) =
              mma::pack_bf16x2(ot[j][2], ot[j][3]);
      }
    }
    const float glast = gm[n - 1], elast = exp_t<bf16_t>(glast);
#pragma unroll
    for (int i = 0; i < KB; ++i)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[i][j][e] *= elast;
#pragma unroll
    for (int jr = 0; jr < 4; ++jr) {
      if (16 * jr >= n) break;
      const int j0 = 16 * jr + 2 * t;
      float dd[4];  // D_{n-1,j} for the fragment columns j0, j0 + 1, j0 + 8, j0 + 9
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j0 + (u & 1) + 8 * (u >> 1);
        dd[u] = j < n ? exp_t<bf16_t>(glast - gm[j]) : 0.0f;
      }
      uint32_t bv[kNT / 2][4];
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np)
        tile::frag_b2_trans(bv[np], s.Vn, ldv, 16 * jr, cw + 16 * np, lane);
#pragma unroll
      for (int i = 0; i < KB; ++i) {
        const int kb = rb + 4 * i;
        if (kb >= KS) break;
        uint32_t a[4];
        tile::frag_a_trans(a, kt, ldk, 16 * kb, 16 * jr, lane);
        a[0] = mma::scale_bf16x2(a[0], dd[0], dd[1]);
        a[1] = mma::scale_bf16x2(a[1], dd[0], dd[1]);
        a[2] = mma::scale_bf16x2(a[2], dd[2], dd[3]);
        a[3] = mma::scale_bf16x2(a[3], dd[2], dd[3]);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np)
          tile::mma_x2(st[i][2 * np], st[i][2 * np + 1], a, bv[np]);
      }
    }
    // K 128: the S tile, read only in P1; K 64: X's tile (read only in P2), the next chunk's S.
    put_state(kPTile ? St : Xt);
  }
  if (s_final) {
#pragma unroll
    for (int i = 0; i < KB; ++i) {
      const int kb = rb + 4 * i;
      if (kb >= KS) break;
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s_final[int64_t(bh) * KV + (16 * kb + g + 8 * (e / 2)) * V + v0 + cw + 8 * j + 2 * t + e % 2] =
              st[i][j][e];
    }
  }
}

template <int K>
void launch_k(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta, bool gate_f32,
              const void* s0, bool state_f32, float scale, const Dims& d, const float* gam,
              const bf16_t* Tm, float* s_final, bf16_t* o, bf16_t* S_out, bf16_t* Vn_out,
              cudaStream_t stream) {
  const int64_t smem = smem_bytes<FusedSmem<K>>(d);
  auto* kernel = gdn_fwd_fused_kernel<K>;
  allow_smem(kernel);
  const dim3 grid(unsigned(d.V / kFBV), unsigned(d.H), unsigned(d.B));
  kernel<<<grid, kFWarps * 32, smem, stream>>>(q, k, v, beta, gate_f32, gam, Tm, s0, state_f32,
                                                scale, d, s_final, o, S_out, Vn_out);
  AMOR_CUDA_CHECK_LAUNCH();
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

bool fused_fwd_ok(const Dims& d, const void* q, const void* k, const void* v, const void* o) {
  return fwd_fused_enabled() && variant() == Variant::kSplit && prepare_variant_reg() &&
         d.L == kFRows && (d.K == 64 || d.K == 128) && d.V % kFBV == 0 && aligned(q, 16) &&
         aligned(k, 16) && aligned(v, 16) && aligned(o, 4);
}

bool fused_keep_ok(const Dims& d, const void* k, const void* v) {
  return fwd_fused_enabled() && fwd_keep_fused_enabled() && variant() == Variant::kSplit &&
         prepare_variant_reg() && d.L == kFRows && (d.K == 64 || d.K == 128) &&
         d.V % kFBV == 0 && aligned(k, 16) && aligned(v, 16);
}

bool fused_takes_rows(const Dims& d) { return !fwd_wgmma_ok(d) && fused2_ok(d); }

void launch_fwd_fused(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                      bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                      const float* gam, const bf16_t* Tm, float* s_final, bf16_t* o,
                      bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream, const ChunkRows& rows) {
  if (fwd_wgmma_ok(d))
    return launch_fwd_wgmma(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, Tm, s_final,
                            o, S_out, Vn_out, stream);
  if (fused2_ok(d))
    return launch_fwd_fused2(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, rows, Tm,
                             s_final, o, S_out, Vn_out, stream);
  if (d.K == 64)
    return launch_k<64>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, Tm, s_final, o,
                        S_out, Vn_out, stream);
  launch_k<128>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, Tm, s_final, o, S_out,
                Vn_out, stream);
}

int64_t fwd_fused_smem_bytes(const Dims& d) {
  if (d.L != kFRows) return 0;
  int64_t v1 = 0;
  if (d.K == 64) v1 = smem_bytes<FusedSmem<64>>(d);
  if (d.K == 128) v1 = smem_bytes<FusedSmem<128>>(d);
  return std::max({v1, fwd_fused2_smem_bytes(d), fwd_wgmma_smem_bytes(d)});
}

}  // namespace amor::cuda::gdn
