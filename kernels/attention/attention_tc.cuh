// Device pieces shared by the tensor-core attention kernels (attention_fwd_cuda.cu,
// attention_bwd_cuda.cu) and the declarations of their launchers (called by attention_cuda.cu).
// Included by .cu files only. See attention_cuda.cu for the design.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention_cuda.h"
#include "kernels/cast/cuda_device.cuh"
#include "kernels/core/mma.cuh"
#include "kernels/core/tile.cuh"

namespace amor::cuda::attn {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
// (The tile sizes are the kernels' own: attention_fwd_cuda.cu, attention_bwd_cuda.cu.)
using mma::kLog2e;

// Entries per sequence (or sequence and head) of the balanced backward's compacted row
// statistics: a multiple of 4, and >= Tq + 32 so that a 32-row step starting at any firing row
// stays inside its own sequence's entries (those past the firing rows hold position -1).
__host__ __device__ inline int stat_stride(int Tq) { return (Tq + 3) / 4 * 4 + 32; }

// Shared-memory row stride of a [rows][D] bf16 tile (kernels/core/tile.cuh: conflict-free
// ldmatrix).
template <int D>
constexpr int kLd = int(tile::padded_ld<bf16_t>(D));

// The query rows a block works on. With a gate, rows[b * Tq + r] (r < count[b]) are the firing
// rows of sequence b in increasing order (compacted by compact_firing_rows); without one, row r
// is query r and there are Tq rows. A row's position is its query index + Tk - Tq, and it sees
// keys 0 .. position.
struct RowMap {
  const int32_t* rows;   // null: no gate
  const int32_t* count;  // [B]
  int Tq, offset;
  __device__ __forceinline__ int num_rows(int b) const { return rows ? count[b] : Tq; }
  __device__ __forceinline__ int query(int b, int r) const { return rows ? rows[b * Tq + r] : r; }
  // The first row whose position is >= key (rows are increasing): the first row that sees key.
  __device__ int first_row_seeing(int b, int key) const {
    const int want = key - offset;  // query index
    if (!rows) return want > 0 ? want : 0;
    int lo = 0, hi = count[b];
    const int32_t* r = rows + int64_t(b) * Tq;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (r[mid] < want) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
};

// Gated (balanced layout): zeroes the gated-off rows of head h of sequence b in `out` (o or dq,
// [B,Tq,H,D]) and, where lse is not null, their lse; the block takes part `part` of `parts` equal
// shares of the rows. compact_firing_rows lists a sequence's gated-off rows after its firing ones,
// so this replaces the memsets of whole tensors (B*Tq*H*D) by stores of the off rows alone, made
// by blocks of the attention kernel itself (most of them have no firing rows of their own).
template <int D>
__device__ __forceinline__ void zero_gated_off_rows(const RowMap& map, int b, int h, int H,
                                                    int part, int parts, bf16_t* out,
                                                    float* lse) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  const int fired = map.count[b], n = map.Tq - fired;
  const int per = (n + parts - 1) / parts, lo = part * per, hi = lo + per < n ? lo + per : n;
  const int32_t* off = map.rows + int64_t(b) * map.Tq + fired;
  uint4 zero;
  zero.x = zero.y = zero.z = zero.w = 0u;
  for (int c = threadIdx.x; c < (hi - lo) * kChunks; c += kThreads) {
    const int qi = off[lo + c / kChunks], ch = c % kChunks;
    *reinterpret_cast<uint4*>(out + ((int64_t(b) * map.Tq + qi) * H + h) * D + ch * 8) = zero;
    if (lse != nullptr && ch == 0) lse[(int64_t(b) * H + h) * map.Tq + qi] = 0.0f;
  }
}

// Issues the 16-byte cp.async copies (dealt by tile::for_pieces) of `nrows` rows of D bf16 into a
// [nrows][kLd<D>] shared tile; row i comes from src + row_off(i) (elements), or is zero-filled
// where row_off(i) < 0.
template <int D, class RowOff>
__device__ __forceinline__ void load_tile_async(bf16_t* dst, const bf16_t* src, RowOff row_off,
                                                int nrows) {
  tile::for_pieces<kThreads, D / 8>(nrows, D / 8, [&](int r, int p) {
    const int64_t off = row_off(r);
    mma::cp_async_16(dst + r * kLd<D> + p * 8, src + (off >= 0 ? off : 0) + p * 8, off >= 0);
  });
}

// ---- launchers (host), bf16 with D = 64 or 128; rows/count null without a gate. balanced (with
// a gate): the gated layout of the forward and dq kernels (attention_cuda.cu), which also zero
// the gated-off rows of o and lse; else the caller has cleared them. small_tiles (balanced, D =
// 64): 64-row forward blocks, one m-tile per warp (attention_fwd_cuda.cu).
void forward_tc(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                const int32_t* count, float scale, bf16_t* o, float* lse, const AttnDims& n,
                bool balanced, bool small_tiles, cudaStream_t s);
void backward_tc(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                 const int32_t* count, const float* lse, const float* delta, const bf16_t* dout,
                 float scale, bf16_t* dq, bf16_t* dk, bf16_t* dv, const AttnDims& n,
                 cudaStream_t s);
// The balanced gated backward: rows/count as above, and the compacted statistics of the firing
// rows (pos_c, lse_c in log2 units, delta_c; stride stat_stride(Tq); attention_cuda.cu).
// dq_acc null: a dk/dv and a dq kernel (deterministic); else the fused dk/dv kernel adds the
// unscaled dQ of the firing rows into dq_acc [B, H, stat_stride(Tq), D] (zeroed at the firing
// rows by the caller) and dq is not written (the caller's dq_finish does); small_tiles: its
// 64-key blocks at D = 64 (16 keys per warp; attention_bwd_cuda.cu).
void backward_tc_balanced(const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* rows,
                          const int32_t* count, const int32_t* pos_c, const float* lse_c,
                          const float* delta_c, const bf16_t* dout, float scale, bf16_t* dq,
                          bf16_t* dk, bf16_t* dv, float* dq_acc, bool small_tiles,
                          const AttnDims& n, cudaStream_t s);

}  // namespace amor::cuda::attn
