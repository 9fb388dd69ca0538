// The fused forward pass of the gated delta rule, second form (the default where it applies;
// AMOR_GDN_FUSED=v1 keeps gated_delta_fwd_fused_cuda.cu's kernel, whose top comment has the
// algorithm: the prepare's gam and Tm, then per chunk of n <= 64 rows with state S [K, V]
//   X~ = diag(beta) (V - diag(e) (K S)),  Vn = Tm X~,
//   O  = scale diag(e) Q S + P Vn,        P_rj = scale (q_r . k_j) D_rj (j <= r),
//   S' = e_{n-1} S + K^T diag(D_{n-1,.}) Vn).
//
// Why a second form. The first gives each warp 16 rows of the chunk and 16 rows of S, so every
// product mixes the warps' results: three block barriers per chunk, and each phase waits for the
// slowest warp (the triangles Tm and P give warp 3 four times warp 0's k steps). Measured on the
// H200 it runs ~7.4 us per chunk step at K 128 (2 blocks of 4 warps per SM) where the MMA issue
// rate alone would allow ~2 us: the chain is latency and barrier bound.
// But the columns of S are independent (only rows of S mix: K S, Tm X~, K^T D Vn all act on the
// left). Here a warp owns 16 columns of V outright: all K rows of its 16 columns of S (f32, in
// registers) and the same columns of Y, X~, Vn and O. Its whole state chain
//   S -> Y = K S -> X~ -> Vn = Tm X~ -> S'
// then runs in its own registers with no barrier and no trip through shared memory: the warp
// computes the transposes, M = its 16 columns,
//   Y^T  = S^T K^T          (A: S^T, B: K^T = the k tile read plainly),
//   Vn^T = X~^T Tm^T        (A: X~^T, B: Tm^T = the Tm tile read plainly; Tm lower: k <= n block),
//   S'^T = e_{n-1} S^T + (Vn^T D) K   (A: Vn^T with column j scaled by D_{n-1,j}; B: the k tile
//                           read transposed),
//   O^T  = scale S^T Q^T diag(e) + Vn^T P^T   (B: the q tile, and P from shared memory),
// and a C fragment (16 x 8 f32 accumulators, two neighbouring n tiles) packed to bf16 pairs is
// the A fragment of the next product without shuffles (kernels/core/mma.cuh), so S^T, X~^T and
// Vn^T feed the next MMA straight from the accumulators. What the warps share is read-only per
// chunk: the k, q, Tm, v and P tiles (cp.async), beta, and per row e = exp(gam) and the decay to
// the chunk's last row dl_j = D_{n-1,j}. Everything that does not depend on the state comes from
// the prepare (ChunkRows, gated_delta_fwd_fused.cuh): P = the masked, decayed Q K^T, e and dl,
// so the latency-bound chain runs only the state's products and their epilogues. (Until session
// 16 the block computed P itself, 10 16x16 blocks dealt over the warps, both V blocks of a head
// the same P, and every warp its own exps of e and D: the same values, now computed once; the
// outputs are the same bits.)
// Two barriers per chunk, both for buffers: A (chunk c's tiles landed, chunk c - 1's free:
// chunk c's P and chunk c + 1's k, q, e, dl copied into the other buffers), B (P landed; Tm, v,
// beta of chunk c read: chunk c + 1's copied into the single buffers).
//
// Block: 16 NW columns of V, NW warps. K 64: NW 4 (64 columns; 65 KB of shared memory, state 32
// f32 per lane: three blocks per SM, H24 V128 B8 = 384 blocks on 132 SMs x 3 = one wave). K 128:
// NW 16 when V is a multiple of 256 (a block per head: q, k, Tm, P read once per head;
// 123 KB: one block per SM, H16 B8 = 128 blocks, one wave), else NW 8 (V a multiple of 128;
// 106 KB, two blocks per SM); 16 warps per SM either way, register budget 128 per thread, 64 of
// them the state. Other shapes take the first form.
//
// Work per warp and chunk (K 128): Y^T 8 n tiles x 8 k steps = 64 MMAs, Vn^T 20 (triangle), O^T
// 64 + 20, S'^T 16 x 4 = 64: ~230, and ~110 ldmatrix; 4 warps per SM sub-partition: ~920 MMAs
// per chunk step and sub-partition, ~5.5K cycles at mma.sync's peak (~6 cycles per m16n8k16 per
// sub-partition), ~3 us; 32 chunks ~100 us against 473 us for the first form. K 64, NW 4, 3
// blocks per SM: 136 MMAs per warp (156 with P), ~410 per sub-partition and chunk step, ~1.3 us
// per chunk, ~45 us for 32 chunks (first form: 286 us). These are issue bounds; the measured
// chain is ~5x slower (RESULTS.md session 14's ncu: ~2,300 instructions per warp and chunk, the
// MMAs ~7% of them, 46% issue utilisation at 3 warps per scheduler): the epilogues, the address
// arithmetic and the latency of the chain's ~8 + 4 + 4 dependent MMAs per chunk and warp.
//
// Rounding: as the first form, X~ and Vn rounded to bf16 once, P and scale e Q S as there (P as
// the prepare computes it, by the instructions this kernel ran before); the
// state update's operand is bf16(D bf16(Vn)) (the first form rounds bf16(D k) instead): within
// the bf16 tolerance. Keep mode (S_out, Vn_out: the chunk start state as the bf16 pairs that
// Y^T and O^T multiply, and the bf16 Vn) stores them from the A fragments, pairs of rows of one
// column, transposed to pairs of columns by one shuffle with the neighbouring lane (4-byte
// stores); the backward's recomputation runs this same kernel without o, so kept and recomputed
// S and Vn are the same bits. At K 64 these and o (when 16-byte aligned) leave through shared
// memory instead: A fragments (o's: its O^T pairs packed) written transposed by stmatrix.trans
// into the warp's 32 x 16 staging tile, then 16-byte rows (flush_stage; the same bits as the
// 4-byte store_t form, which K 128 and an unaligned o keep).
#include <stdexcept>
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_fwd_fused.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda::gdn {
namespace {

constexpr int kRows = 64;  // the chunk (L = 64)

// kPrepP: P comes from the prepare (ChunkRows::P), else the block computes it from the chunk's
// gam (chain_p_form).
template <int K, int NW, bool kPrepP>
struct Fused2Smem {
  static constexpr int BV = 16 * NW;
  static constexpr int ldk = K + 8, ldt = kRows + 8, ldv = BV + 8;  // tile::padded_ld<bf16_t>
  // K 64: o, S_out and Vn_out leave through a per-warp staging tile (32 rows of the warp's 16
  // columns), 16-byte stores; K 128 has no shared memory to spare for it (two blocks of 8 warps
  // per SM).
  static constexpr bool kStageO = K == 64;
  static constexpr int ldo = 16 + 8;
  bf16_t *k[2], *q[2], *Tm, *v, *P, *ost;
  float *ed[2], *beta;  // ed: the chunk's e (64 floats), then its dl (64)
  float* gam[2];        // without kPrepP: the chunk's gam, for P
  __host__ __device__ Fused2Smem(Carve& c, const Dims&) {
    for (int i = 0; i < 2; ++i) k[i] = c.take_as<bf16_t>(kRows * ldk);
    for (int i = 0; i < 2; ++i) q[i] = c.take_as<bf16_t>(kRows * ldk);
    Tm = c.take_as<bf16_t>(kRows * ldt);
    v = c.take_as<bf16_t>(kRows * ldv);
    P = c.take_as<bf16_t>(kRows * ldt);
    ost = kStageO ? c.take_as<bf16_t>(NW * 32 * ldo) : nullptr;
    for (int i = 0; i < 2; ++i) ed[i] = c.take_as<float>(2 * kRows);
    beta = c.take_as<float>(kRows);
    for (int i = 0; i < 2; ++i) gam[i] = kPrepP ? nullptr : c.take_as<float>(kRows);
  }
};

// Rows r0 .. r0 + 31 of a matrix whose rows lie in a warp's staging tile (tile row i = row
// r0 + i, 16 columns, ld ldo; written by the warp's stmatrix before) to dst (row r at dst + r ld),
// rows < nrows, two 16-byte stores per row. The tile is free again when it returns.
__device__ __forceinline__ void flush_stage(const bf16_t* so, int ldo, int r0, bf16_t* dst,
                                            int64_t ld, int nrows, int lane) {
  mma::sync_warp();
#pragma unroll
  for (int i = lane; i < 64; i += 32) {
    const int r = r0 + i / 2;
    if (r < nrows)
      *reinterpret_cast<uint4*>(dst + r * ld + 8 * (i % 2)) =
          *reinterpret_cast<const uint4*>(so + (i / 2) * ldo + 8 * (i % 2));
  }
  mma::sync_warp();
}

// tile_load_zfill (gated_delta_cuda_common.cuh) of a chunk's kRows rows x COLS bf16 columns with
// the block's thread count NT known: the same pieces to the same threads in the same order (piece
// idx = tid + j NT: row idx / vpr, column (idx % vpr) 8), but each thread's column and first row
// are fixed, so its loop unrolls to a pointer step and one cp.async per row it copies, without the
// per-piece division and 64-bit multiply of the generic loop (the chain issues ~20 such pieces per
// thread and chunk; it is bound by its instruction stream). kFixed false: tile_load_zfill
// itself, which K 128 keeps (at 128 registers ptxas spilled more with the unrolled form, +350
// bytes, and with it rolled, +40-90).
template <int NT, int COLS, bool kFixed>
__device__ __forceinline__ void chunk_tile_load(const bf16_t* src, int64_t gstride, int rows,
                                                bf16_t* dst, int ld) {
  if constexpr (!kFixed) {
    tile_load_zfill(src, gstride, rows, kRows, COLS, dst, ld);
  } else {
    constexpr int vpr = COLS / 8, step = NT / vpr;  // 16-byte pieces per row, rows per pass
    static_assert(COLS % 8 == 0 && NT % vpr == 0 && kRows % step == 0, "whole passes");
    const int tid = int(threadIdx.x), r0 = tid / vpr, c = (tid % vpr) * 8;
    const bf16_t* from = src + int64_t(r0) * gstride + c;
    const int64_t from_step = int64_t(step) * gstride;
#pragma unroll
    for (int i = 0; i < kRows / step; ++i) {
      const int r = r0 + i * step;
      mma::cp_async_16(dst + r * ld + c, r < rows ? from : src + c, r < rows);
      from += from_step;
    }
  }
}

// MinB: blocks per SM that the register budget is cut for (launch_bounds).
// O16: o is 16-byte aligned (its rows are H V elements apart, V % 64 == 0), so the staged
// 16-byte stores of K 64 may run.
// kPrepP: as Fused2Smem (gam read only without it).
template <int K, int NW, int MinB, bool O16, bool kPrepP>
__global__ void __launch_bounds__(NW * 32, MinB)
    gdn_fwd_fused2_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                          const bf16_t* __restrict__ v, const void* beta_in, bool gate_f32,
                          const float* __restrict__ gam, const float* __restrict__ e_in,
                          const float* __restrict__ dl_in,
                          const bf16_t* __restrict__ P_in, const bf16_t* __restrict__ Tm,
                          const void* s0, bool state_f32, float scale, Dims d,
                          float* __restrict__ s_final, bf16_t* __restrict__ o,
                          bf16_t* __restrict__ S_out, bf16_t* __restrict__ Vn_out) {
  using Sm = Fused2Smem<K, NW, kPrepP>;
  constexpr int KS = K / 16;  // k16 steps over K
  constexpr int KN = K / 8;   // n8 tiles of S^T (its columns: the rows of S)
  // 16-row blocks of the chunk per group of Y^T and O^T (8 kRG accumulators each, the state
  // repacked 4 / kRG times per product). By ptxas (register caps 128 at K 128, 168 at K 64): K 128
  // spills 368 bytes with 4, 468 with 1, 676 with 2; K 64 ~40 bytes with any.
  constexpr int kRG = K > 64 ? 4 : 2;
  constexpr int BV = Sm::BV, ldk = Sm::ldk, ldt = Sm::ldt, ldv = Sm::ldv, NT = NW * 32;
  constexpr bool kFixedLoads = K == 64;  // chunk_tile_load
  extern __shared__ float smem[];
  Carve carve{smem};
  Sm s(carve, d);
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int T = int(d.T), H = int(d.H), V = int(d.V), NC = int(d.NC);
  const int bh = int(blockIdx.z) * H + int(blockIdx.y), v0 = int(blockIdx.x) * BV;
  const int cw = 16 * warp;                                      // the warp's columns in the block
  const int64_t xb = int64_t(blockIdx.z) * T * H + blockIdx.y;  // token row of (b, t 0, h)
  const int64_t KV = int64_t(K) * V;
  const bool with_o = o != nullptr;  // without: the backward's recomputation of S and Vn
  auto rows_of = [&](int c) { return T - c * kRows < kRows ? T - c * kRows : kRows; };
  auto load_kq = [&](int c, int buf) {
    const int64_t x0 = xb + int64_t(c) * kRows * H;
    const int n = rows_of(c);
    chunk_tile_load<NT, K, kFixedLoads>(k + x0 * K, H * K, n, pick(s.k, buf), ldk);
    if (with_o)
      chunk_tile_load<NT, K, kFixedLoads>(q + x0 * K, H * K, n, pick(s.q, buf), ldk);
    vec_load_zfill(e_in + int64_t(bh) * T + c * kRows, n, kRows, pick(s.ed, buf));
    vec_load_zfill(dl_in + int64_t(bh) * T + c * kRows, n, kRows, pick(s.ed, buf) + kRows);
    if (!kPrepP && with_o) vec_load_zfill(gam + int64_t(bh) * T + c * kRows, n, kRows, s.gam[buf]);
  };
  // The prepare's P of chunk c (ChunkRows::P: rows past the chunk zero-filled).
  auto load_p = [&](int c) {
    chunk_tile_load<NT, kRows, kFixedLoads>(P_in + (int64_t(bh) * T + c * kRows) * kRows, kRows,
                                            rows_of(c), s.P, ldt);
  };
  auto load_tmv = [&](int c) {
    const int64_t x0 = xb + int64_t(c) * kRows * H;
    const int n = rows_of(c);
    chunk_tile_load<NT, kRows, kFixedLoads>(Tm + (int64_t(bh) * T + c * kRows) * kRows, kRows, n,
                                            s.Tm, ldt);
    chunk_tile_load<NT, BV, kFixedLoads>(v + x0 * V + v0, H * V, n, s.v, ldv);
  };
  // beta of row tid of chunk c (threads < 64), zero past the chunk.
  auto beta_of = [&](int c) {
    const int n = rows_of(c);
    return tid < n ? load_any(beta_in, xb + int64_t(c * kRows + tid) * H, gate_f32) : 0.0f;
  };

  // The warp's state, S^T [16 columns, K] as C fragments: st[j][e] = S[8 j + 2 t + e % 2]
  // [cw + g + 8 (e / 2)] (block columns), f32.
  float st[KN][4];
#pragma unroll
  for (int j = 0; j < KN; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      st[j][e] = s0 ? load_any(s0, state_at(bh, KV, V, v0, cw, j, e, g, t), state_f32) : 0.0f;
  load_kq(0, 0);
  load_tmv(0);
  tile_commit();
  if (tid < kRows) s.beta[tid] = beta_of(0);

  for (int c = 0; c < NC; ++c) {
    const int n = rows_of(c), buf = c & 1;
    const bf16_t *kt = pick(s.k, buf), *qt = pick(s.q, buf);
    const float *em = pick(s.ed, buf), *dlm = em + kRows;
    tile_wait<0>();
    __syncthreads();  // A: chunk c's tiles and beta visible; chunk c - 1's k, q, e, dl, P free
    if (kPrepP && with_o) load_p(c);
    tile_commit();
    if (c + 1 < NC) load_kq(c + 1, buf ^ 1);
    tile_commit();
    const float bnext = c + 1 < NC && tid < kRows ? beta_of(c + 1) : 0.0f;  // stored after B

    // Without kPrepP: P = scale (Q K^T) o D, masked (j <= r < n), bf16 into the P tile, the 10
    // lower 16 x 16 blocks (mb, jb), jb <= mb, dealt over the warps (the prepare's p_rows: the
    // same MMAs in the same k order, the same epilogue).
    if (!kPrepP && with_o) {
      const float* const gm = s.gam[buf];
      for (int job = warp; job < 10; job += NW) {
        const int mb = (job >= 1) + (job >= 3) + (job >= 6), jb = job - mb * (mb + 1) / 2;
        float p[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
          uint32_t a[4], b[4];
          tile::frag_a(a, qt, ldk, 16 * mb, 16 * kk, lane);
          tile::frag_b2(b, kt, ldk, 16 * kk, 16 * jb, lane);
          tile::mma_x2(p[0], p[1], a, b);
        }
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = 16 * mb + g + 8 * hh;
          const float gr = gm[r];
#pragma unroll
          for (int h2 = 0; h2 < 2; ++h2) {
            const int j = 16 * jb + 8 * h2 + 2 * t;
            const float y0 = j <= r && r < n ? scale * p[h2][2 * hh] * exp_t<bf16_t>(gr - gm[j])
                                             : 0.0f;
            const float y1 = j + 1 <= r && r < n
                                 ? scale * p[h2][2 * hh + 1] * exp_t<bf16_t>(gr - gm[j + 1])
                                 : 0.0f;
            *reinterpret_cast<uint32_t*>(s.P + r * ldt + j) = mma::pack_bf16x2(y0, y1);
          }
        }
      }
    }

    // Y^T = S^T K^T and X~^T = (V^T - Y^T diag(e)) diag(beta), by groups of kRG 16-row blocks
    // of the chunk (n tiles 2 kRG h .. of Y^T), packed into the A fragments xa[kb] of
    // Vn^T = X~^T Tm^T (k step kb: the chunk's rows 16 kb ..). Keep mode: the start state from
    // the A fragments.
    uint32_t xa[4][4];
#pragma unroll
    for (int h = 0; h < 4 / kRG; ++h) {
      float y[2 * kRG][4] = {};
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t a[4];
        pack_s(st, kk, a);
        if (h == 0 && S_out) {
          bf16_t* const so_dst = S_out + (int64_t(bh) * NC + c) * KV + v0 + cw;
          if constexpr (Sm::kStageO) {  // (the kept arrays are 16-byte aligned: Carve)
            tile::store_a_trans(s.ost + warp * 32 * Sm::ldo, Sm::ldo, 0, 16 * (kk % 2), lane, a);
            if (kk % 2 == 1)
              flush_stage(s.ost + warp * 32 * Sm::ldo, Sm::ldo, 16 * (kk - 1), so_dst, V, K, lane);
          } else {
            store_a_rows(a, g, t, 16 * kk, so_dst, V, K);
          }
        }
#pragma unroll
        for (int np = 0; np < kRG; ++np) {
          uint32_t b[4];
          tile::frag_b2(b, kt, ldk, 16 * kk, 16 * (kRG * h + np), lane);
          tile::mma_x2(y[2 * np], y[2 * np + 1], a, b);
        }
      }
#pragma unroll
      for (int np = 0; np < kRG; ++np) {
        const int kb = kRG * h + np;  // the chunk's rows 16 kb ..
        // v^T as C fragments: the transposed read of the v tile gives (v[r][c], v[r+1][c]).
        uint32_t vf[4];  // n tiles cw (vf[0], vf[1]) and cw + 8 (vf[2], vf[3])
        tile::frag_b2_trans(vf, s.v, ldv, 16 * kb, cw, lane);
        float x[2][4];
        x_tilde<true>(y[2 * np], y[2 * np + 1], vf, s.beta, em, kb, t, x);
        tile::a_from_c(xa[kb], x, 0);
      }
    }

    // Vn^T = X~^T Tm^T (Tm lower: row block rb takes the k steps <= rb), packed into the A
    // fragments vn[rb] (the chunk's rows 16 rb ..).
    uint32_t vn[4][4];
#pragma unroll
    for (int rb = 0; rb < 4; ++rb) {
      float acc[2][4] = {};
#pragma unroll
      for (int kb = 0; kb <= rb; ++kb) {
        uint32_t b[4];
        tile::frag_b2(b, s.Tm, ldt, 16 * kb, 16 * rb, lane);
        tile::mma_x2(acc[0], acc[1], xa[kb], b);
      }
      tile::a_from_c(vn[rb], acc, 0);
    }

    if constexpr (kPrepP) tile_wait<1>();  // chunk c's P landed (c + 1's k, q, e, dl may not)
    __syncthreads();  // B: P visible; Tm, v and beta of chunk c no longer read
    if (c + 1 < NC) load_tmv(c + 1);
    tile_commit();
    if (tid < kRows) s.beta[tid] = bnext;

    if (Vn_out) {
      bf16_t* const vo = Vn_out + (int64_t(bh) * T + c * kRows) * V + v0 + cw;
      if constexpr (Sm::kStageO) {
        bf16_t* const so = s.ost + warp * 32 * Sm::ldo;
#pragma unroll
        for (int rb = 0; rb < 4; ++rb) {
          tile::store_a_trans(so, Sm::ldo, 0, 16 * (rb % 2), lane, vn[rb]);
          if (rb % 2 == 1) flush_stage(so, Sm::ldo, 16 * (rb - 1), vo, V, n, lane);
        }
      } else {
#pragma unroll
        for (int rb = 0; rb < 4; ++rb) store_a_rows(vn[rb], g, t, 16 * rb, vo, V, n);
      }
    }

    // O^T = scale S^T Q^T diag(e) + Vn^T P^T by groups of kRG 16-row blocks of the chunk (n tiles
    // 2 kRG h ..), stored transposed (store_t: rows < n only).
    if (with_o) {
      bf16_t* const oc = o + (xb + int64_t(c) * kRows * H) * V + v0 + cw;
#pragma unroll
      for (int h = 0; h < 4 / kRG; ++h) {
        float ot[2 * kRG][4] = {};
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
          uint32_t a[4];
          pack_s(st, kk, a);
#pragma unroll
          for (int np = 0; np < kRG; ++np) {
            uint32_t b[4];
            tile::frag_b2(b, qt, ldk, 16 * kk, 16 * (kRG * h + np), lane);
            tile::mma_x2(ot[2 * np], ot[2 * np + 1], a, b);
          }
        }
#pragma unroll
        for (int jj = 0; jj < 2 * kRG; ++jj) {
          const int r = 16 * kRG * h + 8 * jj + 2 * t;
          const float se0 = scale * em[r], se1 = scale * em[r + 1];
          ot[jj][0] *= se0;
          ot[jj][1] *= se1;
          ot[jj][2] *= se0;
          ot[jj][3] *= se1;
        }
#pragma unroll
        for (int np = 0; np < kRG; ++np) {
          const int rb = kRG * h + np;
#pragma unroll
          for (int kb = 0; kb <= rb; ++kb) {
            uint32_t b[4];
            tile::frag_b2(b, s.P, ldt, 16 * kb, 16 * rb, lane);
            tile::mma_x2(ot[2 * np], ot[2 * np + 1], vn[kb], b);
          }
        }
        if constexpr (Sm::kStageO && O16) {
          // O's rows 16 kRG h .. (the same bf16 pairs as store_t's) transposed into the warp's
          // staging tile by stmatrix.trans, then two 16-byte stores per row (rows < n).
          static_assert(!Sm::kStageO || kRG == 2, "the staging tile holds 32 rows");
          bf16_t* const so = s.ost + warp * 32 * Sm::ldo;
#pragma unroll
          for (int np = 0; np < kRG; ++np) {
            uint32_t oa[4];
            tile::a_from_c(oa, ot, np);
            tile::store_a_trans(so, Sm::ldo, 0, 16 * np, lane, oa);
          }
          flush_stage(so, Sm::ldo, 16 * kRG * h, oc, int64_t(H) * V, n, lane);
        } else {
#pragma unroll
          for (int jj = 0; jj < 2 * kRG; ++jj) {
            const int r = 16 * kRG * h + 8 * jj + 2 * t;
            store_t(mma::pack_bf16x2(ot[jj][0], ot[jj][1]), g, r, g, oc, int64_t(H) * V, n);
            store_t(mma::pack_bf16x2(ot[jj][2], ot[jj][3]), g, r, g + 8, oc, int64_t(H) * V, n);
          }
        }
      }
    }

    // S'^T = e_{n-1} S^T + (Vn^T D) K, D_j = exp(gam_{n-1} - gam_j) (j < n, else 0) scaling the
    // columns of Vn^T (A), the k tile read transposed (B). Past the chunk's n rows everything is
    // zero: no k step is skipped (a warp-uniform skip there cost ptxas registers).
    const float elast = em[n - 1];
#pragma unroll
    for (int j = 0; j < KN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[j][e] *= elast;
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      float dd[4];  // D_j for the fragment's columns j = 16 kb + 2 t + {0, 1, 8, 9} (0 past n)
#pragma unroll
      for (int u = 0; u < 4; ++u) dd[u] = dlm[16 * kb + 2 * t + (u & 1) + 8 * (u >> 1)];
      uint32_t a[4];
      a[0] = mma::scale_bf16x2(vn[kb][0], dd[0], dd[1]);
      a[1] = mma::scale_bf16x2(vn[kb][1], dd[0], dd[1]);
      a[2] = mma::scale_bf16x2(vn[kb][2], dd[2], dd[3]);
      a[3] = mma::scale_bf16x2(vn[kb][3], dd[2], dd[3]);
#pragma unroll
      for (int np = 0; np < KS; ++np) {
        uint32_t b[4];
        tile::frag_b2_trans(b, kt, ldk, 16 * kb, 16 * np, lane);
        tile::mma_x2(st[2 * np], st[2 * np + 1], a, b);
      }
    }
  }
  if (s_final) {
#pragma unroll
    for (int j = 0; j < KN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s_final[state_at(bh, KV, V, v0, cw, j, e, g, t)] = st[j][e];
  }
}

// K 128 in blocks of 8 warps with the whole register file (255 per thread, no spills; one block
// of 8 warps per SM, two waves at H16 V256 B8) instead of 16 warps per SM at 128 registers
// (ptxas spills ~370 bytes): AMOR_GDN_FUSED=v2w8, and auto wherever V is a multiple of 256.
// Until session 18 auto took the 16-warp blocks where they filled 3/4 of the SMs (the H200's
// timings of session 7, when the chain computed P itself); with P from the prepare, only the
// 255-register form reads it back without spilling, and it won at every shape timed (H100,
// session 18, H16 K128 V256, forward us: B8 T2048 472.3 vs 511.3 for the 16-warp form with P in
// its chain, fwd+bwd 2129 vs 2309; B4..B1, where auto took it already, the same).
bool wide_regs(const Dims& d) {
  const std::string& f = fused_form();
  if (f != "auto") return f == "v2w8";
  // (V not a multiple of 256: the 8-warp form at 128 registers, two blocks per SM, as v2.)
  return d.V % 256 == 0;
}

// The kernel for (K, V): 100 K + warps per block, + 1000 for the one-block-per-SM K 128 form;
// 0: the second form does not apply.
int config_for(const Dims& d) {
  if (d.L != kRows) return 0;
  if (d.K == 64 && d.V % 64 == 0) return 6404;
  if (d.K == 128 && d.V % 128 == 0 && wide_regs(d)) return 13808;
  if (d.K == 128 && d.V % 256 == 0) return 12816;
  if (d.K == 128 && d.V % 128 == 0) return 12808;
  return 0;
}

template <int K, int NW, int MinB, bool kPrepP>
void launch_kwp(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                const float* gam, const ChunkRows& rows, const bf16_t* Tm, float* s_final,
                bf16_t* o, bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream) {
  using Sm = Fused2Smem<K, NW, kPrepP>;
  const int64_t smem = smem_bytes<Sm>(d);
  auto* kernel = gdn_fwd_fused2_kernel<K, NW, MinB, false, kPrepP>;
  if constexpr (Sm::kStageO) {
    if (reinterpret_cast<uintptr_t>(o) % 16 == 0)
      kernel = gdn_fwd_fused2_kernel<K, NW, MinB, true, kPrepP>;
  }
  allow_smem(kernel);
  const dim3 grid(unsigned(d.V / (16 * NW)), unsigned(d.H), unsigned(d.B));
  kernel<<<grid, NW * 32, smem, stream>>>(q, k, v, beta, gate_f32, gam, rows.e, rows.dl, rows.P,
                                          Tm, s0, state_f32, scale, d, s_final, o, S_out, Vn_out);
  AMOR_CUDA_CHECK_LAUNCH();
}

template <int K, int NW, int MinB>
void launch_kw(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
               bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
               const float* gam, const ChunkRows& rows, const bf16_t* Tm, float* s_final,
               bf16_t* o, bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream) {
  if (p_from_prepare(d))
    return launch_kwp<K, NW, MinB, true>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam,
                                         rows, Tm, s_final, o, S_out, Vn_out, stream);
  launch_kwp<K, NW, MinB, false>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, rows, Tm,
                                 s_final, o, S_out, Vn_out, stream);
}

}  // namespace

bool fused2_ok(const Dims& d) { return fused_form() != "v1" && config_for(d) > 0; }

// "auto": P from the prepare except in the K 128 forms at 128 registers (16- or 8-warp blocks),
// where ptxas spills 468 bytes with it against 372 computing P in the chain (reading P back
// needs its loads' addresses live beside the state). The H100's timings (tests/cuda/RESULTS.md
// session 17; forward us, B8 T2048, then B4 T4096): K 64 prepare 321 vs chain 334, 391 vs 447;
// K 128 at B8 (16-warp blocks) 576 vs 534; at B4 (8-warp blocks of 255 registers, no spills
// either way) 487 vs 512.
bool p_from_prepare(const Dims& d) {
  const std::string& f = chain_p_form();
  if (f != "auto") return f == "prepare";
  const int cfg = config_for(d);
  return cfg != 12816 && cfg != 12808;
}

// Blocks per SM: K 64 three (64 KB of shared memory, 168 registers), K 128 one block of 8 warps
// (255 registers: auto where V is a multiple of 256, and v2w8), or with v2 one of 16 warps or
// (V not a multiple of 256) two of 8 (120 / 104 KB, 128 registers).
void launch_fwd_fused2(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                       bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                       const float* gam, const ChunkRows& rows, const bf16_t* Tm, float* s_final,
                       bf16_t* o, bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream) {
  // (A caller's bug: every caller passes them.)
  if (!rows.e || !rows.dl || (o && (p_from_prepare(d) ? !rows.P : !gam)))
    throw std::logic_error("gated delta rule: the fused second form needs the prepare's ChunkRows");
  switch (config_for(d)) {
    case 6404:
      return launch_kw<64, 4, 3>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, rows,
                                 Tm, s_final, o, S_out, Vn_out, stream);
    case 12816:
      return launch_kw<128, 16, 1>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, rows,
                                   Tm, s_final, o, S_out, Vn_out, stream);
    case 12808:
      return launch_kw<128, 8, 2>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, rows,
                                  Tm, s_final, o, S_out, Vn_out, stream);
    case 13808:
      return launch_kw<128, 8, 1>(q, k, v, beta, gate_f32, s0, state_f32, scale, d, gam, rows,
                                  Tm, s_final, o, S_out, Vn_out, stream);
    default:  // the caller checked fused2_ok
      return;
  }
}

int64_t fwd_fused2_smem_bytes(const Dims& d) {
  switch (config_for(d) % 1000) {
    // (the larger of the two P forms: without kPrepP the gam buffers)
    case 404: return smem_bytes<Fused2Smem<64, 4, false>>(d);
    case 816: return smem_bytes<Fused2Smem<128, 16, false>>(d);
    case 808: return smem_bytes<Fused2Smem<128, 8, false>>(d);
    default: return 0;
  }
}

}  // namespace amor::cuda::gdn
