// The bf16 tensor-core forward of causal GQA attention, FlashAttention-2 style (design and memory
// traffic at the top of attention_cuda.cu; fragment layouts in kernels/core/mma.cuh).
//
// One block of 4 warps per (query tile of 128 rows, head h, sequence b); warp w owns rows
// 32w .. 32w+31 as two m-tiles of 16, so every K and V fragment it loads from shared memory feeds
// two MMAs (half the ldmatrix traffic per FLOP of one m-tile per warp, which is what bounded the
// 64-row version). The tile's rows are consecutive queries, or with a gate the next 128 firing
// rows of the sequence (compacted), each with its own causal limit (its position). The block walks
// the key tiles 0 .. (last row's position) / BN (BN = 64 keys at D = 64, 32 at D = 128); K and V
// tiles are double-buffered in shared memory by cp.async. Per key tile, in log2 units
// (x = s * scale * log2 e):
//
//   S = Q K^T (32 x BN per warp, f32)      masked to -inf where key > the row's position
//   m' = max(m, rowmax S),  P = exp2(S - m'),  l = l exp2(m - m') + rowsum P,  O = O exp2(m - m')
//   O += P V                               (P re-packed to bf16 A fragments in registers)
//
// The mask is applied only on the tiles that cross an m-tile's diagonal; a warp skips the key
// tiles that lie entirely beyond its last row (exact: such a tile adds exp2(-inf) = 0 and leaves
// m unchanged). At D = 64 the warp keeps its Q fragments in registers; at D = 128 (where O alone
// takes 128 registers per thread) it re-reads them from shared memory per key tile.
//
// At the end o = O / l and lse = (m + log2 l) ln 2; each warp writes its rows of O through its own
// rows of the Q tile in shared memory, so the global stores are whole 16-byte chunks of a row.
// Rows with no valid entries (padding) keep m = -inf; their alpha and P use 0 in place of m so that
// no NaN appears (they are not stored).
//
// kBal (the balanced layout of gated rows, attention_cuda.cu): the tile's rows are the firing rows
// counted from the last one backwards (padding at the front), the grid is (h, b, tile), warp w owns
// m-tiles w and 7 - w and skips the early one's MMAs and softmax past its last row, and the block
// zeroes its share of o and lse at the gated-off rows.
#include <cmath>

#include "kernels/attention/attention_tc.cuh"

namespace amor::cuda::attn {
namespace {

// m-tiles of 16 rows per warp: 2 (32 rows per warp, 128 per block); 1 (64 per block) at D = 64
// under AMOR_ATTENTION_GATED=fused64: ~half the registers, so 4 blocks per SM in place of 2, at
// the price of one MMA per K/V fragment and, balanced, warps that end ~1/4 tile apart.
constexpr int kFwdMTiles = 2;
// Keys per key tile: 64; 32 at D = 128, where O (128 registers per thread) and a 32 x 64 S
// would not fit in the 255 registers without spilling.
template <int D>
constexpr int kFwdKeys = D == 64 ? 64 : 32;

template <int D>
constexpr bool kFwdQInRegisters = D == 64;

template <int D, int MT>
constexpr int forward_smem_bytes() {
  return (kWarps * 16 * MT + 4 * kFwdKeys<D>) * kLd<D> * int(sizeof(bf16_t));  // Q, K and V x2
}

template <int D, bool kBal, int MT>
__global__ void __launch_bounds__(kThreads, MT == 1 ? 4 : 1)
    forward_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                   const bf16_t* __restrict__ v, RowMap map, int H, int Hkv, int Tk,
                   float scale_log2, bf16_t* __restrict__ o, float* __restrict__ lse) {
  constexpr int BN = kFwdKeys<D>;
  constexpr int kFwdWarpRows = 16 * MT, kFwdRows = kWarps * kFwdWarpRows;  // per warp, block
  constexpr bool kQRegs = kFwdQInRegisters<D>;
  extern __shared__ uint4 smem_raw[];
  __shared__ int s_pos[kFwdRows];
  __shared__ int s_qi[kFwdRows];
  bf16_t* sQ = reinterpret_cast<bf16_t*>(smem_raw);
  // Buffer i of K, then of V (computed, not an array of pointers, which would go to local memory).
  auto sK = [&](int i) { return sQ + (kFwdRows + 2 * BN * i) * kLd<D>; };
  auto sV = [&](int i) { return sQ + (kFwdRows + 2 * BN * i + BN) * kLd<D>; };

  // Old layout: block (tile from the end of the grid's x, h, b), tile rows [128 t, 128 t + 128),
  // padding at the back. Balanced (gated): block (h, b, t) with t = 0 the last 128 firing rows,
  // tile rows [n - 128 (t + 1), n - 128 t), padding at the front (only the shortest tile is
  // partial); it also zeroes its share of the gated-off rows.
  const int b = kBal ? blockIdx.y : blockIdx.z, h = kBal ? blockIdx.x : blockIdx.y;
  const int tile = kBal ? blockIdx.z : gridDim.x - 1 - blockIdx.x;  // the longest rows first
  const int nrows = map.num_rows(b);
  const int row0 = kBal ? nrows - (tile + 1) * kFwdRows : tile * kFwdRows;
  const int g = h / (H / Hkv), Tq = map.Tq;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g4 = lane >> 2, t4 = lane & 3;
  if constexpr (kBal) zero_gated_off_rows<D>(map, b, h, H, tile, gridDim.z, o, lse);
  if (kBal ? row0 + kFwdRows <= 0 : row0 >= nrows) return;  // no firing rows left for the block
  const int nvalid = nrows - row0 < kFwdRows ? nrows - row0 : kFwdRows;  // (old layout)

  for (int r = tid; r < kFwdRows; r += kThreads) {
    const bool real = kBal ? row0 + r >= 0 : r < nvalid;
    const int qi = real ? map.query(b, row0 + r) : -1;
    s_qi[r] = qi;
    s_pos[r] = qi >= 0 ? qi + map.offset : -1;
  }
  __syncthreads();
  const int ntiles = s_pos[kBal ? kFwdRows - 1 : nvalid - 1] / BN + 1;
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
  load_tile_async<D>(sQ, q, q_row, kFwdRows);
  load_kv(0, 0);
  mma::cp_async_commit();

  // The warp's m-tiles (first rows in the tile): old, 32w and 32w + 16; balanced, 16w and
  // 16 (7 - w), an early and a late one, so every warp has about the same work (the tile's rows
  // span ~580 positions at 22% firing, and a warp of 32 consecutive rows would need keys only up
  // to its own last row: the first warp would idle for most of the block's time).
  int mrow[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    mrow[mt] = kBal && MT == 2 ? (mt == 0 ? 16 * warp : 16 * (2 * kWarps - 1 - warp))
                               : warp * kFwdWarpRows + 16 * mt;
  // Positions: this thread's rows g4 and g4 + 8 of each m-tile, the m-tile's first row and last
  // real row (rows are increasing; padding is -1), and the warp's last real row (-1: none).
  int pos[MT][2], mt_first_pos[MT], mt_last_pos[MT], warp_last_pos = -1;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    pos[mt][0] = s_pos[mrow[mt] + g4];
    pos[mt][1] = s_pos[mrow[mt] + g4 + 8];
    mt_first_pos[mt] = s_pos[mrow[mt]];
    mt_last_pos[mt] = -1;
    for (int r = 0; r < 16; ++r) {
      const int p = s_pos[mrow[mt] + r];
      mt_last_pos[mt] = p > mt_last_pos[mt] ? p : mt_last_pos[mt];
    }
    warp_last_pos = mt_last_pos[mt] > warp_last_pos ? mt_last_pos[mt] : warp_last_pos;
  }
  float acc[MT][D / 8][4] = {};
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
  uint32_t qf[kQRegs ? MT : 1][kQRegs ? D / 16 : 1][4];

  for (int kt = 0; kt < ntiles; ++kt) {
    mma::cp_async_wait<0>();
    __syncthreads();  // tile kt is in; every warp is done with the buffer reloaded next
    if (kt + 1 < ntiles) load_kv(kt + 1, (kt + 1) & 1);
    mma::cp_async_commit();
    if (kQRegs && kt == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          tile::frag_a(qf[kQRegs ? mt : 0][kQRegs ? kk : 0], sQ, kLd<D>, mrow[mt], kk * 16, lane);
    }
    const int j0 = kt * BN;
    if (j0 > warp_last_pos) continue;  // warp-uniform: every key of the tile is masked
    const bf16_t* cK = sK(kt & 1);
    const bf16_t* cV = sV(kt & 1);
    // Balanced: m-tile 0 (the early one) stops at its own last row (exact, as the warp's skip);
    // m-tile 1 holds the warp's last row. Warp-uniform.
    bool act[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) act[mt] = !kBal || mt > 0 || j0 <= mt_last_pos[mt];

    float s[MT][BN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kQRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qa[mt][i] = qf[mt][kk][i];
        } else {
          if (act[mt]) tile::frag_a(qa[mt], sQ, kLd<D>, mrow[mt], kk * 16, lane);
        }
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t kb[4];
        tile::frag_b2(kb, cK, kLd<D>, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          if (act[mt]) tile::mma_x2(s[mt][2 * np], s[mt][2 * np + 1], qa[mt], kb);
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (!act[mt]) continue;
      const bool masked = j0 + BN - 1 > mt_first_pos[mt];
      float mx[2] = {m[mt][0], m[mt][1]};
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float x = s[mt][nt][i] * scale_log2;
          if (masked && j0 + nt * 8 + 2 * t4 + (i & 1) > pos[mt][i >> 1]) x = -INFINITY;
          s[mt][nt][i] = x;
          mx[i >> 1] = fmaxf(mx[i >> 1], x);
        }
      }
      float base[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
        const float alpha = mma::exp2_approx(m[mt][r] - base[r]);
        m[mt][r] = mx[r];
        l[mt][r] *= alpha;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          acc[mt][dt][2 * r] *= alpha;
          acc[mt][dt][2 * r + 1] *= alpha;
        }
      }
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[mt][nt][i] = mma::exp2_approx(s[mt][nt][i] - base[i >> 1]);
          sum[i >> 1] += s[mt][nt][i];
        }
      }
      l[mt][0] += sum[0];  // per-thread partial sums; the 4 lanes of a row are added at the end
      l[mt][1] += sum[1];
    }
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        if (act[mt]) tile::a_from_c(pa[mt], s[mt], kk);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vb[4];
        tile::frag_b2_trans(vb, cV, kLd<D>, kk * 16, dp * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          if (act[mt]) tile::mma_x2(acc[mt][2 * dp], acc[mt][2 * dp + 1], pa[mt], vb);
      }
    }
  }
  mma::cp_async_wait<0>();

  // O / l as bf16 into the warp's own rows of sQ (only this warp read them), then 16-byte stores.
  mma::sync_warp();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
      inv[r] = l[mt][r] > 0.0f ? 1.0f / l[mt][r] : 0.0f;
      const int row = mrow[mt] + g4 + 8 * r, qi = s_qi[row];
      if (t4 == 0 && qi >= 0)
        lse[(int64_t(b) * H + h) * Tq + qi] = (m[mt][r] + log2f(l[mt][r])) * 0.69314718055994531f;
    }
    bf16_t* rows_smem = sQ + (mrow[mt] + g4) * kLd<D>;
    tile::store_c_rows(acc[mt], lane, inv[0], inv[1], rows_smem, rows_smem + 8 * kLd<D>);
  }
  mma::sync_warp();
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = lane; c < kFwdWarpRows * kChunks; c += 32) {
    const int lr = c / kChunks, ch = c % kChunks;
    const int row = (lr < 16 ? mrow[0] : mrow[MT - 1]) + (lr & 15), qi = s_qi[row];
    if (qi >= 0) {
      *reinterpret_cast<uint4*>(o + ((int64_t(b) * Tq + qi) * H + h) * D + ch * 8) =
          *reinterpret_cast<const uint4*>(sQ + row * kLd<D> + ch * 8);
    }
  }
}

template <int D, bool kBal, int MT = kFwdMTiles>
void launch_forward(const bf16_t* q, const bf16_t* k, const bf16_t* v, const RowMap& map,
                    float scale, bf16_t* o, float* lse, const AttnDims& n, cudaStream_t s) {
  constexpr int kSmem = forward_smem_bytes<D, MT>();
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(forward_kernel<D, kBal, MT>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const unsigned tiles = unsigned(ceil_div(n.Tq, int64_t(kWarps * 16 * MT)));
  const dim3 grid = kBal ? dim3(unsigned(n.H), unsigned(n.B), tiles)
                         : dim3(tiles, unsigned(n.H), unsigned(n.B));
  forward_kernel<D, kBal, MT><<<grid, kThreads, kSmem, s>>>(q, k, v, map, int(n.H), int(n.Hkv),
                                                        int(n.Tk), scale * kLog2e, o, lse);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void forward_tc(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                const int32_t* count, float scale, bf16_t* o, float* lse, const AttnDims& n,
                bool balanced, bool small_tiles, cudaStream_t s) {
  const RowMap map{rows, count, int(n.Tq), int(n.Tk - n.Tq)};
  const bool bal = rows != nullptr && balanced;
  if (n.D == 64 && bal && small_tiles) {
    launch_forward<64, true, 1>(q, k, v, map, scale, o, lse, n, s);
  } else if (n.D == 64) {
    bal ? launch_forward<64, true>(q, k, v, map, scale, o, lse, n, s)
        : launch_forward<64, false>(q, k, v, map, scale, o, lse, n, s);
  } else if (n.D == 128) {
    bal ? launch_forward<128, true>(q, k, v, map, scale, o, lse, n, s)
        : launch_forward<128, false>(q, k, v, map, scale, o, lse, n, s);
  } else {
    ::amor::cuda_fail(__FILE__, __LINE__, "attn::forward_tc", "head dim is neither 64 nor 128");
  }
}

}  // namespace amor::cuda::attn
