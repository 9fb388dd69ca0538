// The fused forward of the gated delta rule (gated_delta_fwd_fused_cuda.cu, which explains the
// math): what gated_delta_fwd_cuda.cu and the fused kernel's file share. Included by .cu files
// only, after gated_delta_cuda_common.cuh.
#pragma once
#include <string>

#include "kernels/core/env_switch.h"
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"

namespace amor::cuda::gdn {

// AMOR_GDN_FWD (read once; env_switch.h refuses other values): "split" keeps the three-kernel
// forward (prepare, state pass, output); "fused" (default) runs the fused forward where it
// applies (fused_fwd_ok).
inline bool fwd_fused_enabled() {
  static const bool on = env_choice("AMOR_GDN_FWD", {"fused", "split"}, "fused") == "fused";
  return on;
}

// AMOR_GDN_FUSED (read once) picks the form of the fused pass: "v1" the first form
// (gated_delta_fwd_fused_cuda.cu) everywhere; "v2" the second form (gated_delta_fwd_fused2_cuda.cu:
// a warp per 16 columns of V, no barrier in the state chain) where it applies (fused2_ok), with
// K 128 in 16-warp blocks of 128 registers; "v2w8" the same with K 128 in 8-warp blocks of 255
// registers; "auto" (default) the second form, at K 128 (V a multiple of 256) in the 8-warp
// blocks of 255 registers. Session 7's H200 timings (tests/cuda/RESULTS.md call 3; forward us,
// B8 T2048, then B4 T4096): K 64 v2 330 vs v1 345, 480 vs 510; K 128 v2 467 vs v2w8 507 vs v1
// 603 at B8 H16, but v2 817 vs v2w8 497 vs v1 599 at B4 (64 blocks leave half the GPU idle): auto
// took v2 where its blocks covered 3/4 of the SMs until session 18, when P came from the prepare
// and v2w8 won at B8 too (H100: 472 vs 511 us; gated_delta_fwd_fused2_cuda.cu's wide_regs). A
// forward that keeps the backward's intermediates (training) runs the same form as one that does
// not: both must give o and the final state bit for bit (GatedDeltaSmallK128's "kept" checks),
// though v1 keeps ~1.5% faster (fwd+bwd H24 1361 vs 1381, H16 2451 vs 2482 / v2w8 2461). "wg": at
// K 64 the wgmma form (gated_delta_fwd_wgmma_cuda.cu; opt-in until it is timed on the GPU),
// elsewhere as "auto".
inline const std::string& fused_form() {
  static const std::string form =
      env_choice("AMOR_GDN_FUSED", {"auto", "v1", "v2", "v2w8", "wg"}, "auto");
  return form;
}

// AMOR_GDN_CHAIN_P (read once) picks where the second form (gated_delta_fwd_fused2_cuda.cu)
// takes P = scale (Q K^T) o D from: "prepare" the prepare computes it for all chunks in parallel
// (ChunkRows::P, written and read back: 8 KB per chunk and head), "chain" each block of the state
// chain computes it itself (as before session 17: no P traffic, but 10 16 x 16 blocks of MMAs
// and their exps in the latency-bound chain, and their registers beside the state); "auto"
// (default): "prepare", except "chain" in the K 128 forms of 128 registers, where reading P back
// spilled more (p_from_prepare has the timings). Both give the same bits (the same instructions).
inline const std::string& chain_p_form() {
  static const std::string form =
      env_choice("AMOR_GDN_CHAIN_P", {"auto", "prepare", "chain"}, "auto");
  return form;
}

// AMOR_GDN_FWD_KEEP (read once): "state" keeps the forward that keeps the backward's
// intermediates (`saved`) as it was: the full prepare (gam, W, U, Tm) and the register state pass
// (S, Vn), then the fused pass for o; and so the backward's recomputation. "fused"
// (default): the prepare writes gam, W and Tm only (PrepOut::kWTm) and the fused pass writes S and
// Vn besides o (launch_fwd_fused's S_out, Vn_out), both in the forward and in the backward's
// recomputation (launch_intermediates), so kept and recomputed intermediates are the same bits.
inline bool fwd_keep_fused_enabled() {
  static const bool on = env_choice("AMOR_GDN_FWD_KEEP", {"fused", "state"}, "fused") == "fused";
  return on;
}

// The bf16 halves of a packed pair as f32 (lo: the element of the smaller index); both fused
// forms unpack their bf16 fragments with them.
__device__ __forceinline__ float bf_lo(uint32_t p) {
  const uint32_t u = p << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
__device__ __forceinline__ float bf_hi(uint32_t p) {
  const uint32_t u = p & 0xffff0000u;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Register helpers of the fused forms that keep the state in wgmma / mma.sync C fragments
// (gated_delta_fwd_fused2_cuda.cu, gated_delta_fwd_wgmma_cuda.cu).

// (The plain packing of a C fragment pair into an A fragment is tile::a_from_c.)

// The A fragment of S^T's k step kk from the state's accumulators: as tile::a_from_c, but each
// pair one cvt.rn.bf16x2 in a volatile asm, which the compiler neither merges nor keeps: Y^T
// (twice, by halves) and O^T repack the same state, and merged packs would hold 2 K / 8 more
// registers through the chunk (ptxas: 128 registers with 570 bytes of spills at K 128 before).
template <int KN>
__device__ __forceinline__ void pack_s(const float (&st)[KN][4], int kk, uint32_t (&a)[4]) {
#ifdef AMOR_CUDA_EMU
  tile::a_from_c(a, st, kk);
#else
  auto cvt = [](float lo, float hi) {
    uint32_t r;
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  };
  a[0] = cvt(st[2 * kk][0], st[2 * kk][1]);
  a[1] = cvt(st[2 * kk][2], st[2 * kk][3]);
  a[2] = cvt(st[2 * kk + 1][0], st[2 * kk + 1][1]);
  a[3] = cvt(st[2 * kk + 1][2], st[2 * kk + 1][3]);
#endif
}

// x = (M[row][col], M[row + 1][col]) in lane (g, t) (row even, col = col0 + g: a packed A
// fragment register of M^T) stored as 4-byte column pairs of a row-major M (dst + r ld + c) for
// rows < nrows: the lane of even g takes row `row`, columns col, col + 1 (its lo half and its
// neighbour g + 1's), the odd one row + 1, columns col - 1, col. Warp-collective (a shuffle).
__device__ __forceinline__ void store_t(uint32_t x, int g, int row, int col, bf16_t* dst,
                                        int64_t ld, int nrows) {
  const uint32_t y = __shfl_xor_sync(0xffffffffu, x, 4);
  const bool ev = (g & 1) == 0;
  const uint32_t w = ev ? (x & 0xffffu) | (y << 16) : (y >> 16) | (x & 0xffff0000u);
  const int r = ev ? row : row + 1, c = ev ? col : col - 1;
  if (r < nrows) *reinterpret_cast<uint32_t*>(dst + r * ld + c) = w;
}

// The element (8 j + 2 t + e % 2, v0 + cw + g + 8 (e / 2)) of a [K, V] state whose C fragments
// st[j][e] a warp holds (S^T for its 16 columns from v0 + cw): index into the state of head bh.
// (The sum in this order: the kernels' machine code depends on it.)
__device__ __forceinline__ int64_t state_at(int bh, int64_t KV, int V, int v0, int cw, int j,
                                            int e, int g, int t) {
  return int64_t(bh) * KV + int64_t(8 * j + 2 * t + e % 2) * V + v0 + cw + g + 8 * (e / 2);
}

// An A fragment of M^T (M's rows r0 .. r0 + 15; the warp's 16 columns of M^T are M's columns
// dst points at) stored into row-major M as rows < nrows: its four registers by store_t.
__device__ __forceinline__ void store_a_rows(const uint32_t (&a)[4], int g, int t, int r0,
                                             bf16_t* dst, int64_t ld, int nrows) {
  store_t(a[0], g, r0 + 2 * t, g, dst, ld, nrows);
  store_t(a[1], g, r0 + 2 * t, g + 8, dst, ld, nrows);
  store_t(a[2], g, r0 + 8 + 2 * t, g, dst, ld, nrows);
  store_t(a[3], g, r0 + 8 + 2 * t, g + 8, dst, ld, nrows);
}

// X~^T = (V^T - Y^T diag(e)) diag(beta) for the chunk's rows 16 kb .. 16 kb + 15 (the n tiles
// y0, y1 of Y^T; vf: v^T's C fragments of the warp's columns g and g + 8, tile::frag_b2_trans),
// as C fragments x[hh] (rows 16 kb + 8 hh + 2 t, + 1). gm: the chunk's gam, or with kGivenE its
// e = exp(gam) (ChunkRows::e: the same bits as the exp here).
template <bool kGivenE = false>
__device__ __forceinline__ void x_tilde(const float (&y0)[4], const float (&y1)[4],
                                        const uint32_t (&vf)[4], const float* beta,
                                        const float* gm, int kb, int t, float (&x)[2][4]) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = 16 * kb + 8 * hh + 2 * t;
    const float2 bt = *reinterpret_cast<const float2*>(beta + r);
    float e0, e1;
    if constexpr (kGivenE) {
      const float2 ee = *reinterpret_cast<const float2*>(gm + r);
      e0 = ee.x;
      e1 = ee.y;
    } else {
      e0 = exp_t<bf16_t>(gm[r]);
      e1 = exp_t<bf16_t>(gm[r + 1]);
    }
    const float* yy = hh ? y1 : y0;
    const uint32_t vl = vf[hh], vh = vf[2 + hh];  // columns g, g + 8
    x[hh][0] = bt.x * (bf_lo(vl) - e0 * yy[0]);
    x[hh][1] = bt.y * (bf_hi(vl) - e1 * yy[1]);
    x[hh][2] = bt.x * (bf_lo(vh) - e0 * yy[2]);
    x[hh][3] = bt.y * (bf_hi(vh) - e1 * yy[3]);
  }
}

// What gdn_prepare_reg_kernel writes (gated_delta_fwd_cuda.cu): gam, W, U (and Tm when asked);
// gam and Tm; gam, W and Tm.
enum class PrepOut { kAll, kTm, kWTm };

// The dims gdn_prepare_reg_kernel carves its shared memory with: in its Tm-only forms the v tile
// holds q (V = K) when the kernel computes ChunkRows::P, else it is absent (V = 0): where P comes
// from the chain, q's tile would only take shared memory (17 KB a block at K 128) and so blocks
// per SM from the prepare.
__host__ __device__ inline Dims prepare_layout_dims(const Dims& d, bool tm_only, bool with_q) {
  Dims r = d;
  if (tm_only) r.V = with_q ? d.K : 0;
  return r;
}

// What the prepare computes for the second fused form (gated_delta_fwd_fused2_cuda.cu) besides
// gam and Tm, so that the state chain, which is latency bound, does none of the state-independent
// work: per row r of a chunk of n rows, e_r = exp(gam_r) and dl_r = exp(gam_{n-1} - gam_r) (the
// decay from row r to the chunk's last row; 0 for r >= n), f32 [BH, T]; and, when the pass computes
// o, P = scale (Q K^T) o D masked (j <= r < n), the chunk's [64, 64] block per 64 rows, bf16
// [BH, T, 64] (zero above the diagonal). Each value is computed by the very instructions the pass
// used to run (the same MMAs in the same order, the same exp), so the pass's results keep their
// bits. The buffers take the place of the three-kernel forward's U (Scratch), which the fused
// forms never form: chunk_rows_floats(BH T) floats (gated_delta_cuda_common.cuh).
struct ChunkRows {
  float* e = nullptr;
  float* dl = nullptr;
  bf16_t* P = nullptr;  // null: no o (the backward's recomputation of S and Vn)
};
__host__ __device__ inline ChunkRows chunk_rows_at(float* region, const Dims& d, bool with_p) {
  const int64_t BHT4 = (d.B * d.H * d.T + 3) / 4 * 4;  // (16-byte aligned arrays)
  ChunkRows r;
  r.e = region;
  r.dl = region + BHT4;
  r.P = with_p ? reinterpret_cast<bf16_t*>(region + 2 * BHT4) : nullptr;
  return r;
}

// gam [BH, T] (f32) and Tm [BH, T, 64] (bf16: the rounding every use of Tm applies; rows of
// the chunk only) from k, g, beta: gdn_prepare_reg_kernel in its Tm-only form (the same bits as
// the full kernel's gam and Tm); with W non-null also W [BH, T, K] (bf16, the full kernel's bits).
// With rows non-null also its e and dl, and its P from q and scale when rows->P is non-null.
void launch_prepare_tm(const bf16_t* k, const void* g, const void* beta, bool gate_f32,
                       const Dims& d, float* gam, bf16_t* W, bf16_t* Tm, cudaStream_t stream,
                       const ChunkRows* rows = nullptr, const bf16_t* q = nullptr,
                       float scale = 0.0f);

// Whether launch_fwd_fused runs the second form for these dims (then it needs the prepare's
// ChunkRows), and whether that form then takes P from the prepare (chain_p_form; else the
// ChunkRows' P stays null and the prepare neither reads q nor computes P).
bool fused_takes_rows(const Dims& d);
bool p_from_prepare(const Dims& d);

// Whether the fused pass can compute the backward's intermediates (S, Vn) for these inputs: as
// fused_fwd_ok without q and o (k and v 16-byte aligned), and AMOR_GDN_FWD_KEEP not "state".
bool fused_keep_ok(const Dims& d, const void* k, const void* v);

// Whether the fused forward handles these inputs: bf16, chunk 64, K 64 or 128, V a multiple of
// 64, 16-byte aligned q, k and v (v: as the full prepare needs), 4-byte aligned o, and the
// default variants (AMOR_GDN_FWD, AMOR_GDN_VARIANT and AMOR_GDN_PREPARE unset).
bool fused_fwd_ok(const Dims& d, const void* q, const void* k, const void* v, const void* o);

// o (when non-null; then q too), the final state (when non-null) and the backward's
// intermediates (when S_out, Vn_out are non-null: every chunk's start state [BH, NC, K, V] and Vn
// [BH, T, V], bf16, Scratch's layout) from q, k, v, beta and the prepare's gam and Tm.
// rows: the prepare's ChunkRows where fused_takes_rows(d) (P with o), else ignored.
void launch_fwd_fused(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                      bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                      const float* gam, const bf16_t* Tm, float* s_final, bf16_t* o,
                      bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream, const ChunkRows& rows);

// Shared memory of the fused kernel (bytes), for gated_delta_max_smem_bytes: the larger of the
// two forms'.
int64_t fwd_fused_smem_bytes(const Dims& d);

// The second form (gated_delta_fwd_fused2_cuda.cu), which launch_fwd_fused calls where
// fused2_ok: AMOR_GDN_FUSED not v1; chunk 64, and K 64 with V a multiple of 64 or K 128 with V a
// multiple of 128 (the caller has checked the rest: fused_fwd_ok or fused_keep_ok). The same
// arguments and outputs as launch_fwd_fused.
bool fused2_ok(const Dims& d);
void launch_fwd_fused2(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                       bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                       const float* gam, const ChunkRows& rows, const bf16_t* Tm, float* s_final,
                       bf16_t* o, bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream);
int64_t fwd_fused2_smem_bytes(const Dims& d);

// The wgmma form (gated_delta_fwd_wgmma_cuda.cu), which launch_fwd_fused calls where
// fwd_wgmma_ok: AMOR_GDN_FUSED=wg, chunk 64, K 64, V a multiple of 64. The same arguments and
// outputs as launch_fwd_fused.
bool fwd_wgmma_ok(const Dims& d);
void launch_fwd_wgmma(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                      bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                      const float* gam, const bf16_t* Tm, float* s_final, bf16_t* o,
                      bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream);
int64_t fwd_wgmma_smem_bytes(const Dims& d);

}  // namespace amor::cuda::gdn
