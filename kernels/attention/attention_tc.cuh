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

namespace amor::cuda::attn {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
// (The tile sizes are the kernels' own: attention_fwd_cuda.cu, attention_bwd_cuda.cu.)
constexpr float kLog2e = 1.4426950408889634f;

// Entries per sequence (or sequence and head) of the balanced backward's compacted row
// statistics: a multiple of 4, and >= Tq + 32 so that a 32-row step starting at any firing row
// stays inside its own sequence's entries (those past the firing rows hold position -1).
__host__ __device__ inline int stat_stride(int Tq) { return (Tq + 3) / 4 * 4 + 32; }

// Shared-memory row stride of a [rows][D] bf16 tile: 16 bytes of padding shift consecutive rows
// by four banks, so the eight rows an ldmatrix reads at once hit different banks.
template <int D>
constexpr int kLd = D + 8;

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

// Issues the 16-byte cp.async copies of `nrows` rows of D bf16 into a [nrows][ld] shared tile;
// row i comes from src + row_off(i) (elements), or is zero-filled where row_off(i) < 0.
template <int D, class RowOff>
__device__ __forceinline__ void load_tile_async(bf16_t* dst, const bf16_t* src, RowOff row_off,
                                                int nrows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < nrows * kChunks; c += kThreads) {
    const int r = c / kChunks, ch = c % kChunks;
    const int64_t off = row_off(r);
    mma::cp_async_16(dst + r * kLd<D> + ch * 8, src + (off >= 0 ? off : 0) + ch * 8, off >= 0);
  }
}

// A fragment (16 x 16) of a row-major shared tile at (row0, k0).
template <int D>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16_t* tile, int row0, int k0) {
  const int lane = threadIdx.x & 31;
  mma::ldmatrix_x4(a, tile + (row0 + (lane & 15)) * kLd<D> + k0 + (lane >> 4) * 8);
}
// B fragments of two n-tiles (n0 .. n0+15) over k0 .. k0+15 where B[k][n] = tile[n][k]
// (b[0..1]: n-tile n0, b[2..3]: n-tile n0 + 8).
template <int D>
__device__ __forceinline__ void load_b_rows(uint32_t (&b)[4], const bf16_t* tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  mma::ldmatrix_x4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * kLd<D> + k0 +
                          ((lane >> 3) & 1) * 8);
}
// B fragments of two n-tiles (n0 .. n0+15) over k0 .. k0+15 where B[k][n] = tile[k][n].
template <int D>
__device__ __forceinline__ void load_b_cols(uint32_t (&b)[4], const bf16_t* tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  mma::ldmatrix_x4_trans(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd<D> + n0 +
                                (lane >> 4) * 8);
}

__device__ __forceinline__ void mma2(float (&c0)[4], float (&c1)[4], const uint32_t (&a)[4],
                                     const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
  mma::mma_bf16_16816(c0, a, b0);
  mma::mma_bf16_16816(c1, a, b1);
}

// The A fragment of k-step kk from a [16 x 8 n-tiles] f32 accumulator (mma.cuh's register reuse).
template <int N>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = mma::pack_bf16x2(c[2 * kk][0], c[2 * kk][1]);
  a[1] = mma::pack_bf16x2(c[2 * kk][2], c[2 * kk][3]);
  a[2] = mma::pack_bf16x2(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = mma::pack_bf16x2(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Stores a [16 x D] f32 accumulator of a warp (rows g and g + 8 of the warp's 16) as bf16, row g
// times mul_a to dst_a and row g + 8 times mul_b to dst_b (the rows' first elements; null where
// the row is not stored).
template <int D>
__device__ __forceinline__ void store_acc_rows(const float (&acc)[D / 8][4], float mul_a,
                                               float mul_b, bf16_t* dst_a, bf16_t* dst_b) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int col = dt * 8 + 2 * t;
    if (dst_a) {
      *reinterpret_cast<uint32_t*>(dst_a + col) =
          mma::pack_bf16x2(acc[dt][0] * mul_a, acc[dt][1] * mul_a);
    }
    if (dst_b) {
      *reinterpret_cast<uint32_t*>(dst_b + col) =
          mma::pack_bf16x2(acc[dt][2] * mul_b, acc[dt][3] * mul_b);
    }
  }
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
