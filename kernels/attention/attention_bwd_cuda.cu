// The bf16 tensor-core backward of causal GQA attention, FlashAttention-2 style, deterministic
// (no atomics): one kernel for dk and dv per key tile and one for dq per query tile, both
// recomputing P = exp2(S log2e scale - lse log2e) from the forward's lse (design at the top of
// attention_cuda.cu; fragment layouts in kernels/core/mma.cuh). delta = rowsum(dO * O) comes
// precomputed (attention_cuda.cu). With dS = P (dP - delta), dP = dO V^T:
//
//   dV = P^T dO      dK = scale dS^T Q      dQ = scale dS K
//
// dk/dv kernel: a block of 4 warps per (key tile, kv head g, sequence b): at D = 64 the tile is
// 128 keys, warp w owning keys 32w .. 32w+31 as two m-tiles (each Q and dO fragment it loads from
// shared memory feeds two MMAs); at D = 128, 64 keys, 16 per warp (dK and dV of 16 keys already
// take 128 registers per thread). Each warp keeps its keys' dK, dV in registers. The block walks
// the query heads of the group and, per head, the query tiles (32 rows: consecutive queries, or
// compacted firing rows) from the first row that sees the tile's first key; Q and dO tiles are
// double-buffered (cp.async). Per tile it computes the transposed products, so that P^T and dS^T
// come out of the MMAs in the accumulator layout and go straight back in as A fragments:
//   S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
// A warp skips the query tiles whose last row does not see its first key (exact: P = dS = 0).
// dq kernel: as the forward (128 query rows per block, 32 per warp as two m-tiles; key tiles of
// 32, double-buffered; fully masked key tiles skipped per warp):
//   S = Q K^T, dP = dO V^T, dQ += dS K.
// kBal (the balanced layout of gated rows, attention_cuda.cu): dq as the forward's kBal (tiles
// from the last firing row, warps on an early and a late m-tile, dq zeroed at gated-off rows),
// with lse and delta from compacted arrays; dk/dv takes each step's row positions, lse and delta
// from compacted arrays by cp.async (no dependent global loads), its grid key-tile-major.
// Both kernels write their results once, so the backward is deterministic. The dq kernel
// recomputes S and dP (7 products in all where a fused kernel with f32 atomics for dQ needs 5):
// the price of determinism and of no f32 dQ scratch.
// kFused (dk/dv kernel, balanced only; the default gated backward): that fused kernel. It adds
// each step's dQ = dS K into an f32 accumulator of the compacted rows by atomics and no dq
// kernel runs (attention_cuda.cu zeroes the accumulator and scatters it to dq): 0.74x the MMAs
// of the two kernels at 22% firing, not bitwise deterministic.
#include <cmath>

#include "kernels/attention/attention_tc.cuh"

namespace amor::cuda::attn {
namespace {

// ---------------------------------------------------------------------------------------- dq
// 128 query rows per block, 32 per warp (two m-tiles, so each K and V fragment loaded from shared
// memory feeds two MMAs), key tiles of 32. At D = 64 the warp keeps its Q and dO fragments in
// registers; at D = 128 (dQ alone takes 128 registers per thread) it re-reads them per key tile.
constexpr int kDqMTiles = 2;
constexpr int kDqWarpRows = 16 * kDqMTiles;      // 32
constexpr int kDqRows = kWarps * kDqWarpRows;    // 128
constexpr int kDqKeys = 32;
template <int D>
constexpr bool kDqQInRegisters = D == 64;
template <int D>
constexpr int dq_smem_bytes() {
  return (2 * kDqRows + 4 * kDqKeys) * kLd<D> * int(sizeof(bf16_t));  // Q, dO, then K, V twice
}

template <int D, bool kBal>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
              const bf16_t* __restrict__ v, RowMap map, int H, int Hkv, int Tk, float scale_log2,
              float scale, const float* __restrict__ lse, const float* __restrict__ delta, int S,
              const bf16_t* __restrict__ dout, bf16_t* __restrict__ dq) {
  constexpr int MT = kDqMTiles, BN = kDqKeys;
  constexpr bool kRegs = kDqQInRegisters<D>;
  extern __shared__ uint4 smem_raw[];
  __shared__ int s_pos[kDqRows];
  __shared__ int s_qi[kDqRows];
  __shared__ float s_lse[kDqRows];
  __shared__ float s_delta[kDqRows];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* sdO = sQ + kDqRows * kLd<D>;
  // Buffer i of K, then of V (computed, not an array of pointers, which would go to local memory).
  auto sK = [&](int i) { return sQ + (2 * kDqRows + 2 * BN * i) * kLd<D>; };
  auto sV = [&](int i) { return sQ + (2 * kDqRows + 2 * BN * i + BN) * kLd<D>; };

  // Block layout and the warps' m-tiles as the forward's (attention_fwd_cuda.cu): old, block (tile
  // from the end of x, h, b), padding at the back, warp w on rows 32w .. 32w + 31; balanced
  // (gated), block (h, b, t) with t = 0 the last 128 firing rows, padding at the front, warp w on
  // m-tiles w and 7 - w, and the block zeroes its share of dq's gated-off rows.
  const int b = kBal ? blockIdx.y : blockIdx.z, h = kBal ? blockIdx.x : blockIdx.y;
  const int tile = kBal ? blockIdx.z : gridDim.x - 1 - blockIdx.x;  // the longest rows first
  const int nrows = map.num_rows(b);
  const int row0 = kBal ? nrows - (tile + 1) * kDqRows : tile * kDqRows;
  const int g = h / (H / Hkv), Tq = map.Tq;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g4 = lane >> 2, t4 = lane & 3;
  if constexpr (kBal) zero_gated_off_rows<D>(map, b, h, H, tile, gridDim.z, dq, nullptr);
  if (kBal ? row0 + kDqRows <= 0 : row0 >= nrows) return;
  const int nvalid = nrows - row0 < kDqRows ? nrows - row0 : kDqRows;  // (old layout)

  for (int r = tid; r < kDqRows; r += kThreads) {
    const bool real = kBal ? row0 + r >= 0 : r < nvalid;
    const int qi = real ? map.query(b, row0 + r) : -1;
    s_qi[r] = qi;
    s_pos[r] = qi >= 0 ? qi + map.offset : -1;
    // Balanced: lse (in log2 units) and delta of the compacted rows (attention_cuda.cu).
    const int64_t st = kBal ? (int64_t(b) * H + h) * S + row0 + r : (int64_t(b) * H + h) * Tq + qi;
    s_lse[r] = qi >= 0 ? lse[st] * (kBal ? 1.0f : kLog2e) : 0.0f;
    s_delta[r] = qi >= 0 ? delta[st] : 0.0f;
  }
  __syncthreads();
  const int ntiles = s_pos[kBal ? kDqRows - 1 : nvalid - 1] / BN + 1;
  auto q_row = [&](int r) -> int64_t {
    return s_qi[r] >= 0 ? ((int64_t(b) * Tq + s_qi[r]) * H + h) * D : -1;
  };
  auto load_kv = [&](int kt, int buf) {
    auto kv_row = [&](int r) -> int64_t {
      const int j = kt * BN + r;
      return j < Tk ? ((int64_t(b) * Tk + j) * Hkv + g) * D : -1;
    };
    load_tile_async<D>(sK(buf), k, kv_row, BN);
    load_tile_async<D>(sV(buf), v, kv_row, BN);
  };
  load_tile_async<D>(sQ, q, q_row, kDqRows);
  load_tile_async<D>(sdO, dout, q_row, kDqRows);
  load_kv(0, 0);
  mma::cp_async_commit();

  int mrow[MT];  // the warp's m-tiles (their first rows in the tile)
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    mrow[mt] = kBal ? (mt == 0 ? 16 * warp : 16 * (2 * kWarps - 1 - warp))
                    : warp * kDqWarpRows + 16 * mt;
  // This thread's rows g4 and g4 + 8 of each m-tile, the m-tile's first row and last real row,
  // the warp's last real row (-1: none); the rows' lse and delta are read from shared memory
  // where used (kept in registers, they made the D = 128 kernel spill).
  int pos[MT][2], mt_first_pos[MT], mt_last_pos[MT], warp_last_pos = -1;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    mt_first_pos[mt] = s_pos[mrow[mt]];
    pos[mt][0] = s_pos[mrow[mt] + g4];
    pos[mt][1] = s_pos[mrow[mt] + g4 + 8];
    mt_last_pos[mt] = -1;
    for (int r = 0; r < 16; ++r) {
      const int p = s_pos[mrow[mt] + r];
      mt_last_pos[mt] = p > mt_last_pos[mt] ? p : mt_last_pos[mt];
    }
    warp_last_pos = mt_last_pos[mt] > warp_last_pos ? mt_last_pos[mt] : warp_last_pos;
  }
  float acc[MT][D / 8][4] = {};
  uint32_t qf[kRegs ? MT : 1][kRegs ? D / 16 : 1][4], of[kRegs ? MT : 1][kRegs ? D / 16 : 1][4];

  for (int kt = 0; kt < ntiles; ++kt) {
    mma::cp_async_wait<0>();
    __syncthreads();
    if (kt + 1 < ntiles) load_kv(kt + 1, (kt + 1) & 1);
    mma::cp_async_commit();
    if (kRegs && kt == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          tile::frag_a(qf[kRegs ? mt : 0][kRegs ? kk : 0], sQ, kLd<D>, mrow[mt], kk * 16, lane);
          tile::frag_a(of[kRegs ? mt : 0][kRegs ? kk : 0], sdO, kLd<D>, mrow[mt], kk * 16, lane);
        }
    }
    const int j0 = kt * BN;
    if (j0 > warp_last_pos) continue;  // warp-uniform: every key of the tile is masked (dS = 0)
    const bf16_t* cK = sK(kt & 1);
    const bf16_t* cV = sV(kt & 1);
    bool act[MT];  // balanced: the early m-tile stops at its own last row (warp-uniform)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) act[mt] = !kBal || mt > 0 || j0 <= mt_last_pos[mt];

    float s[MT][BN / 8][4] = {}, dp[MT][BN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4], da[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qa[mt][i] = qf[mt][kk][i], da[mt][i] = of[mt][kk][i];
        } else if (act[mt]) {
          tile::frag_a(qa[mt], sQ, kLd<D>, mrow[mt], kk * 16, lane);
          tile::frag_a(da[mt], sdO, kLd<D>, mrow[mt], kk * 16, lane);
        }
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t kb[4], vb[4];
        tile::frag_b2(kb, cK, kLd<D>, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          if (act[mt]) tile::mma_x2(s[mt][2 * np], s[mt][2 * np + 1], qa[mt], kb);
        tile::frag_b2(vb, cV, kLd<D>, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          if (act[mt]) tile::mma_x2(dp[mt][2 * np], dp[mt][2 * np + 1], da[mt], vb);
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (!act[mt]) continue;
      const bool masked = j0 + BN - 1 > mt_first_pos[mt];
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = i >> 1, row = mrow[mt] + g4 + 8 * r;
          float p = mma::exp2_approx(fmaf(s[mt][nt][i], scale_log2, -s_lse[row]));
          if (masked && j0 + nt * 8 + 2 * t4 + (i & 1) > pos[mt][r]) p = 0.0f;
          s[mt][nt][i] = p * (dp[mt][nt][i] - s_delta[row]);  // dS
        }
      }
    }
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t dsa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        if (act[mt]) tile::a_from_c(dsa[mt], s[mt], kk);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t kb[4];
        tile::frag_b2_trans(kb, cK, kLd<D>, kk * 16, dn * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          if (act[mt]) tile::mma_x2(acc[mt][2 * dn], acc[mt][2 * dn + 1], dsa[mt], kb);
      }
    }
  }
  mma::cp_async_wait<0>();

  // scale dQ as bf16 into the warp's own rows of sQ (only this warp read them), then 16-byte
  // stores of whole rows.
  mma::sync_warp();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    bf16_t* rows_smem = sQ + (mrow[mt] + g4) * kLd<D>;
    tile::store_c_rows(acc[mt], lane, scale, scale, rows_smem, rows_smem + 8 * kLd<D>);
  }
  mma::sync_warp();
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = lane; c < kDqWarpRows * kChunks; c += 32) {
    const int lr = c / kChunks, ch = c % kChunks;
    const int row = (lr < 16 ? mrow[0] : mrow[1]) + (lr & 15), qi = s_qi[row];
    if (qi >= 0) {
      *reinterpret_cast<uint4*>(dq + ((int64_t(b) * Tq + qi) * H + h) * D + ch * 8) =
          *reinterpret_cast<const uint4*>(sQ + row * kLd<D> + ch * 8);
    }
  }
}

// -------------------------------------------------------------------------------------- dk dv
// dst[0] += a, dst[1] += b (dst 8-byte aligned): one vector reduction on sm_90 (two scalar f32
// atomics under the emulator, which has no float2 atomicAdd; the same sums).
__device__ __forceinline__ void atomic_add2(float* dst, float a, float b) {
#ifdef AMOR_CUDA_EMU
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#else
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
#endif
}

// Keys per warp: 32 (two m-tiles of 16) at D = 64, so that each Q and dO fragment loaded from
// shared memory feeds two MMAs; 16 at D = 128, where dK and dV of 16 keys already take 128
// registers per thread. Query rows per step: 32.
template <int D>
constexpr int kDkdvMTiles = D == 64 ? 2 : 1;
template <int D>
constexpr int kDkdvKeys = kWarps * 16 * kDkdvMTiles<D>;  // keys per block: 128 or 64
constexpr int kDkdvRows = 32;
// The fused variant's dS tile in shared memory: [kDkdvRows query rows][BK keys of the block],
// rows padded by 16 bytes as kLd (conflict-free ldmatrix and stmatrix).
template <int BK>
constexpr int kLdS = BK + 8;
// MT m-tiles (16 keys each) per warp: kDkdvMTiles, or 1 at D = 64 for the fused variant's small
// tiles (AMOR_ATTENTION_GATED=fused64: 64-key blocks, ~half the registers, 3 blocks per SM).
template <int D, int MT, bool kFused>
constexpr int dkdv_smem_bytes() {
  constexpr int BK = kWarps * 16 * MT;
  return (2 * BK + 4 * kDkdvRows) * kLd<D> * int(sizeof(bf16_t)) +  // K, V; Q, dO x2
         (kFused ? kDkdvRows * kLdS<BK> * int(sizeof(bf16_t)) : 0);  // dS
}

// Balanced (gated) variant: the step's rows come from the compacted statistics (pos_c, lse_c,
// delta_c of stride S: attention_cuda.cu's row_stats kernel) by 4-byte cp.async, the positions
// two steps ahead (a ring of three) since the Q and dO copies of the next step take their
// addresses from them, lse and delta with the step's Q and dO. No global load of a row index,
// lse or delta ever stalls a warp (the old variant gathers them through the row list in
// registers, two dependent loads per step that warp 0 waits on before the step can start).
//
// Fused variant (kFused, balanced only; the default gated backward): the block also adds the
// step's dQ = dS K over its keys into an f32 accumulator of the compacted rows, dq_acc
// [B, H, S, D] (zeroed by the row_stats kernel, scaled and scattered to dq by dq_finish), with f32
// atomics (FlashAttention-2's backward), so no dq kernel recomputes S and dP: 5 products in
// place of 7. Per step each warp stores its dS^T fragments (keys x rows, the A operand of dK)
// transposed by stmatrix into a shared dS tile [32 rows][block's keys]; after a barrier warp w
// computes dQ of m-tile w % 2 (16 rows) and columns (w / 2) D/2 .. over all the block's keys:
// A = dS (ldmatrix), B = K (ldmatrix.trans of the resident K tile), D/16 accumulators, then one
// red.add per element and row. The next step's barrier orders the reuse of the dS tile. Key
// slices of warps that skipped the step (no row sees them) are skipped too: their dS is 0 and
// their part of the tile is stale. Not deterministic (the order of the f32 additions varies).
template <int D, bool kBal, bool kFused, int MT>
__global__ void __launch_bounds__(kThreads, D == 64 && MT == 1 ? 3 : 1)
    dkdv_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                const bf16_t* __restrict__ v, RowMap map, int H, int Hkv, int Tk,
                float scale_log2, float scale, const float* __restrict__ lse,
                const float* __restrict__ delta, const int32_t* __restrict__ pos_c, int S,
                const bf16_t* __restrict__ dout, bf16_t* __restrict__ dk,
                bf16_t* __restrict__ dv, float* __restrict__ dq_acc) {
  static_assert(!kFused || kBal, "the fused dQ works on the compacted rows of the balanced layout");
  constexpr int BK = kWarps * 16 * MT, BQ = kDkdvRows;
  constexpr int kPosSlots = kBal ? 3 : 2;
  extern __shared__ uint4 smem_raw[];
  __shared__ int s_pos[kPosSlots][BQ];
  __shared__ float s_lse[2][BQ];
  __shared__ float s_delta[2][BQ];
  __shared__ int s_last_pos[2];  // the position of the step's last real row
  bf16_t* sK = reinterpret_cast<bf16_t*>(smem_raw);
  bf16_t* sV = sK + BK * kLd<D>;
  // Buffer i of Q, then of dO (computed, not an array of pointers, which would go to local memory).
  auto sQ = [&](int i) { return sV + (BK + 2 * BQ * i) * kLd<D>; };
  auto sdO = [&](int i) { return sV + (BK + 2 * BQ * i + BQ) * kLd<D>; };
  bf16_t* sdS = sV + (BK + 4 * BQ) * kLd<D>;  // fused: [BQ][kLdS<BK>]

  // Balanced: grid (g, b, key tile), so the first key tiles (the most rows) of every (b, g) start
  // first and the short ones fill the tail (in the block-time model, 5% off the kernel's time).
  const int b = kBal ? blockIdx.y : blockIdx.z, g = kBal ? blockIdx.x : blockIdx.y;
  const int k0 = (kBal ? blockIdx.z : blockIdx.x) * BK;
  const int group = H / Hkv, Tq = map.Tq;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g4 = lane >> 2, t4 = lane & 3;
  const int nrows = map.num_rows(b), r_start = map.first_row_seeing(b, k0);
  const int ntile = nrows > r_start ? (nrows - r_start + BQ - 1) / BQ : 0;
  const int total = group * ntile;  // (head, query tile) steps

  auto kv_row = [&](int r) -> int64_t {
    const int j = k0 + r;
    return j < Tk ? ((int64_t(b) * Tk + j) * Hkv + g) * D : -1;
  };
  load_tile_async<D>(sK, k, kv_row, BK);
  load_tile_async<D>(sV, v, kv_row, BK);
  // Balanced: the positions of step `it` (rows r0 .. r0 + BQ - 1 of the compacted list; -1
  // beyond the firing rows) into ring slot it % 3.
  auto load_pos = [&](int it) {
    const int r0 = r_start + (it % ntile) * BQ;
    if (tid < BQ)
      mma::cp_async_4(&s_pos[it % kPosSlots][tid], pos_c + int64_t(b) * S + r0 + tid, true);
  };
  // Step `it`: head g * group + it / ntile, rows r0 .. r0 + BQ - 1 of the sequence's row list.
  auto stage = [&](int it, int buf) {
    const int h = g * group + it / ntile, r0 = r_start + (it % ntile) * BQ;
    if constexpr (kBal) {
      const int* spos = s_pos[it % kPosSlots];  // landed: loaded two steps ahead
      auto q_row = [&](int r) -> int64_t {
        const int p = spos[r];
        return p >= 0 ? ((int64_t(b) * Tq + (p - map.offset)) * H + h) * D : -1;
      };
      load_tile_async<D>(sQ(buf), q, q_row, BQ);
      load_tile_async<D>(sdO(buf), dout, q_row, BQ);
      const int64_t st = (int64_t(b) * H + h) * S + r0;
      if (tid >= 32 && tid < 32 + BQ)
        mma::cp_async_4(&s_lse[buf][tid - 32], lse + st + tid - 32, true);
      if (tid >= 64 && tid < 64 + BQ)
        mma::cp_async_4(&s_delta[buf][tid - 64], delta + st + tid - 64, true);
      if (tid == 96) s_last_pos[buf] = spos[(nrows - r0 < BQ ? nrows - r0 : BQ) - 1];
      return;
    }
    auto q_row = [&](int r) -> int64_t {
      return r0 + r < nrows ? ((int64_t(b) * Tq + map.query(b, r0 + r)) * H + h) * D : -1;
    };
    load_tile_async<D>(sQ(buf), q, q_row, BQ);
    load_tile_async<D>(sdO(buf), dout, q_row, BQ);
    if (tid < BQ) {
      const bool valid = r0 + tid < nrows;
      const int qi = valid ? map.query(b, r0 + tid) : 0;
      const int64_t st = (int64_t(b) * H + h) * Tq + qi;
      s_pos[buf][tid] = valid ? qi + map.offset : -1;
      s_lse[buf][tid] = valid ? lse[st] * kLog2e : 0.0f;
      s_delta[buf][tid] = valid ? delta[st] : 0.0f;
      if (valid && (tid == BQ - 1 || r0 + tid + 1 == nrows)) s_last_pos[buf] = qi + map.offset;
    }
  };
  if constexpr (kBal) {  // the positions of steps 0 and 1 first: step 0's copies need them
    if (total > 0) load_pos(0);
    if (total > 1) load_pos(1);
    mma::cp_async_commit();
    mma::cp_async_wait<0>();
    __syncthreads();
  }
  if (total > 0) stage(0, 0);
  mma::cp_async_commit();

  const int kr = warp * 16 * MT;   // the warp's first key in the tile
  const int warp_key0 = k0 + kr;   // and its position
  int key[MT][2];                  // this thread's keys g4 and g4 + 8 of each m-tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    key[mt][0] = warp_key0 + mt * 16 + g4;
    key[mt][1] = key[mt][0] + 8;
  }
  float dk_acc[MT][D / 8][4] = {}, dv_acc[MT][D / 8][4] = {};

  for (int it = 0; it < total; ++it) {
    mma::cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < total) stage(it + 1, (it + 1) & 1);
    // Balanced: slot (it + 2) % 3 was last read by step it - 1 (before the barrier).
    if (kBal && it + 2 < total) load_pos(it + 2);
    mma::cp_async_commit();
    const int buf = it & 1;
    const int* spos = s_pos[kBal ? it % kPosSlots : buf];
    // Warp-uniform: no row of the step sees the warp's first key (so none of its keys); skipping
    // is exact, the step would add P = dS = 0. (Block-uniform: the step's last row.)
    const int last_pos = s_last_pos[buf];
    if (last_pos >= warp_key0) {
      const bf16_t* cQ = sQ(buf);
      const bf16_t* cdO = sdO(buf);

      float st[MT][BQ / 8][4] = {}, dpt[MT][BQ / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ka[MT][4], va[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          tile::frag_a(ka[mt], sK, kLd<D>, kr + mt * 16, kk * 16, lane);
          tile::frag_a(va[mt], sV, kLd<D>, kr + mt * 16, kk * 16, lane);
        }
#pragma unroll
        for (int np = 0; np < BQ / 16; ++np) {
          uint32_t qb[4], ob[4];
          tile::frag_b2(qb, cQ, kLd<D>, kk * 16, np * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            tile::mma_x2(st[mt][2 * np], st[mt][2 * np + 1], ka[mt], qb);
          tile::frag_b2(ob, cdO, kLd<D>, kk * 16, np * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            tile::mma_x2(dpt[mt][2 * np], dpt[mt][2 * np + 1], va[mt], ob);
        }
      }
      // Rows are increasing: the step needs no mask when its first row sees the warp's last key and
      // every row is a real one.
      const bool masked = warp_key0 + 16 * MT - 1 > spos[0] || spos[BQ - 1] < 0;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int col = nt * 8 + 2 * t4 + (i & 1);
            float p = mma::exp2_approx(fmaf(st[mt][nt][i], scale_log2, -s_lse[buf][col]));
            if (masked && key[mt][i >> 1] > spos[col]) p = 0.0f;
            st[mt][nt][i] = p;                                           // P^T
            dpt[mt][nt][i] = p * (dpt[mt][nt][i] - s_delta[buf][col]);  // dS^T
          }
        }
      }
#pragma unroll
      for (int kq = 0; kq < BQ / 16; ++kq) {
        uint32_t pa[MT][4], dsa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          tile::a_from_c(pa[mt], st[mt], kq);
          tile::a_from_c(dsa[mt], dpt[mt], kq);
          if constexpr (kFused) {  // dS^T block (keys kr + 16 mt.., rows 16 kq..) -> dS tile
            tile::store_a_trans(sdS, kLdS<BK>, kr + mt * 16, kq * 16, lane, dsa[mt]);
          }
        }
#pragma unroll
        for (int dn = 0; dn < D / 16; ++dn) {
          uint32_t ob[4], qb[4];
          tile::frag_b2_trans(ob, cdO, kLd<D>, kq * 16, dn * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            tile::mma_x2(dv_acc[mt][2 * dn], dv_acc[mt][2 * dn + 1], pa[mt], ob);
          tile::frag_b2_trans(qb, cQ, kLd<D>, kq * 16, dn * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            tile::mma_x2(dk_acc[mt][2 * dn], dk_acc[mt][2 * dn + 1], dsa[mt], qb);
        }
      }
    }  // the warp's part of the step
    if constexpr (kFused) {
      __syncthreads();  // every warp's dS is in the tile
      const int h = g * group + it / ntile, r0 = r_start + (it % ntile) * BQ;
      const int qm = 16 * (warp & 1), c0 = (warp >> 1) * (D / 2);
      float dqa[D / 16][4] = {};
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        // Keys 16 kk .. belong to warp kk / MT; from the first warp that skipped on, all did.
        if (last_pos < k0 + (kk / MT) * 16 * MT) break;
        uint32_t a[4];
        tile::frag_a(a, sdS, kLdS<BK>, qm, kk * 16, lane);
#pragma unroll
        for (int dn = 0; dn < D / 32; ++dn) {
          uint32_t kb[4];
          tile::frag_b2_trans(kb, sK, kLd<D>, kk * 16, c0 + dn * 16, lane);
          tile::mma_x2(dqa[2 * dn], dqa[2 * dn + 1], a, kb);
        }
      }
      if (last_pos >= k0) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = qm + g4 + 8 * r;
          if (spos[row] < 0) continue;  // padding beyond the firing rows
          float* dst = dq_acc + ((int64_t(b) * H + h) * S + r0 + row) * D + c0 + 2 * t4;
#pragma unroll
          for (int nt = 0; nt < D / 16; ++nt)
            atomic_add2(dst + nt * 8, dqa[nt][2 * r], dqa[nt][2 * r + 1]);
        }
      }
    }
  }
  mma::cp_async_wait<0>();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int ka = key[mt][0], kb = key[mt][1];
    const int64_t base_a = ((int64_t(b) * Tk + ka) * Hkv + g) * D;
    const int64_t base_b = ((int64_t(b) * Tk + kb) * Hkv + g) * D;
    tile::store_c_rows(dk_acc[mt], lane, scale, scale, ka < Tk ? dk + base_a : nullptr,
                      kb < Tk ? dk + base_b : nullptr);
    tile::store_c_rows(dv_acc[mt], lane, 1.0f, 1.0f, ka < Tk ? dv + base_a : nullptr,
                      kb < Tk ? dv + base_b : nullptr);
  }
}

// The balanced dk/dv grid: (g, b, key tile); the old one (key tile, g, b).
template <bool kBal>
dim3 dkdv_grid(const AttnDims& n, int keys_per_block) {
  const unsigned key_tiles = unsigned(ceil_div(n.Tk, int64_t(keys_per_block)));
  return kBal ? dim3(unsigned(n.Hkv), unsigned(n.B), key_tiles)
              : dim3(key_tiles, unsigned(n.Hkv), unsigned(n.B));
}

// The fused dk/dv kernel with MT m-tiles per warp (balanced layout; dq_acc as backward_tc_balanced).
template <int D, int MT>
void launch_fused(const bf16_t* q, const bf16_t* k, const bf16_t* v, const RowMap& map,
                  const float* lse, const float* delta, const int32_t* pos_c, const bf16_t* dout,
                  float scale, bf16_t* dk, bf16_t* dv, float* dq_acc, const AttnDims& n,
                  cudaStream_t s) {
  constexpr int kSmem = dkdv_smem_bytes<D, MT, true>();
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(dkdv_kernel<D, true, true, MT>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  dkdv_kernel<D, true, true, MT><<<dkdv_grid<true>(n, kWarps * 16 * MT), kThreads, kSmem, s>>>(
      q, k, v, map, int(n.H), int(n.Hkv), int(n.Tk), scale * kLog2e, scale, lse, delta, pos_c,
      stat_stride(int(n.Tq)), dout, dk, dv, dq_acc);
  AMOR_CUDA_CHECK_LAUNCH();
}

// The dk/dv and dq kernels (deterministic).
template <int D, bool kBal>
void launch_backward(const bf16_t* q, const bf16_t* k, const bf16_t* v, const RowMap& map,
                     const float* lse, const float* delta, const int32_t* pos_c,
                     const bf16_t* dout, float scale, bf16_t* dq, bf16_t* dk, bf16_t* dv,
                     const AttnDims& n, cudaStream_t s) {
  constexpr int kDqSmem = dq_smem_bytes<D>();
  constexpr int MT = kDkdvMTiles<D>;
  const float scale_log2 = scale * kLog2e;
  const int S = stat_stride(int(n.Tq));
  const dim3 kv_grid = dkdv_grid<kBal>(n, kDkdvKeys<D>);
  constexpr int kDkdvSmem = dkdv_smem_bytes<D, MT, false>();
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(dkdv_kernel<D, kBal, false, MT>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kDkdvSmem));
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(dq_kernel<D, kBal>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kDqSmem));
  dkdv_kernel<D, kBal, false, MT><<<kv_grid, kThreads, kDkdvSmem, s>>>(
      q, k, v, map, int(n.H), int(n.Hkv), int(n.Tk), scale_log2, scale, lse, delta, pos_c, S,
      dout, dk, dv, nullptr);
  AMOR_CUDA_CHECK_LAUNCH();
  const unsigned tiles = unsigned(ceil_div(n.Tq, kDqRows));
  const dim3 q_grid = kBal ? dim3(unsigned(n.H), unsigned(n.B), tiles)
                           : dim3(tiles, unsigned(n.H), unsigned(n.B));
  dq_kernel<D, kBal><<<q_grid, kThreads, kDqSmem, s>>>(q, k, v, map, int(n.H), int(n.Hkv),
                                                       int(n.Tk), scale_log2, scale, lse, delta,
                                                       S, dout, dq);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void backward_tc(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                 const int32_t* count, const float* lse, const float* delta, const bf16_t* dout,
                 float scale, bf16_t* dq, bf16_t* dk, bf16_t* dv, const AttnDims& n,
                 cudaStream_t s) {
  const RowMap map{rows, count, int(n.Tq), int(n.Tk - n.Tq)};
  if (n.D == 64) {
    launch_backward<64, false>(q, k, v, map, lse, delta, nullptr, dout, scale, dq, dk, dv, n, s);
  } else if (n.D == 128) {
    launch_backward<128, false>(q, k, v, map, lse, delta, nullptr, dout, scale, dq, dk, dv, n, s);
  } else {
    ::amor::cuda_fail(__FILE__, __LINE__, "attn::backward_tc", "head dim is neither 64 nor 128");
  }
}

void backward_tc_balanced(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                          const int32_t* count, const int32_t* pos_c, const float* lse_c,
                          const float* delta_c, const bf16_t* dout, float scale, bf16_t* dq,
                          bf16_t* dk, bf16_t* dv, float* dq_acc, bool small_tiles,
                          const AttnDims& n, cudaStream_t s) {
  const RowMap map{rows, count, int(n.Tq), int(n.Tk - n.Tq)};
  if (n.D == 64 && dq_acc != nullptr) {
    small_tiles ? launch_fused<64, 1>(q, k, v, map, lse_c, delta_c, pos_c, dout, scale, dk, dv,
                                      dq_acc, n, s)
                : launch_fused<64, kDkdvMTiles<64>>(q, k, v, map, lse_c, delta_c, pos_c, dout,
                                                    scale, dk, dv, dq_acc, n, s);
  } else if (n.D == 128 && dq_acc != nullptr) {  // one m-tile per warp already
    launch_fused<128, kDkdvMTiles<128>>(q, k, v, map, lse_c, delta_c, pos_c, dout, scale, dk, dv,
                                        dq_acc, n, s);
  } else if (n.D == 64) {
    launch_backward<64, true>(q, k, v, map, lse_c, delta_c, pos_c, dout, scale, dq, dk, dv, n, s);
  } else if (n.D == 128) {
    launch_backward<128, true>(q, k, v, map, lse_c, delta_c, pos_c, dout, scale, dq, dk, dv, n,
                               s);
  } else {
    ::amor::cuda_fail(__FILE__, __LINE__, "attn::backward_tc_balanced",
                      "head dim is neither 64 nor 128");
  }
}

}  // namespace amor::cuda::attn
