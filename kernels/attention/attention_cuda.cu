// Causal GQA attention with an optional per-query gate on the GPU (math: attention_ref.h).
//
// Paths:
//  - bf16, head dim 64 or 128, 16-byte aligned tensors: tensor-core kernels, FlashAttention-2
//    style (attention_fwd_cuda.cu, attention_bwd_cuda.cu): 4 warps per block, each warp owning
//    32 query rows (forward, dq) or, at D = 64, 32 keys (dk/dv) as two 16-row m-tiles, so every
//    K/V (or Q/dO) fragment read from shared memory by ldmatrix feeds two MMAs; S = Q K^T and the
//    products of the backward on mma.sync m16n8k16 (bf16 in, f32 accumulate); online softmax in
//    f32 and log2 units (ex2.approx), P kept in registers as the A operand of P V, K/V (Q/dO)
//    tiles double-buffered by cp.async; the causal mask only on tiles that cross a warp's
//    diagonal, and tiles entirely above it skipped per warp; outputs of the forward and dq leave
//    through shared memory as 16-byte row stores. No T x T matrix anywhere. The backward
//    recomputes P from the saved lse: a dk/dv kernel per key tile (walking the query heads of its
//    kv head, so GQA's sum over the group needs no atomics) and a dq kernel per query tile.
//    Deterministic (no atomics, fixed summation order), except the default gated backward
//    (fused, below), whose dk/dv kernel adds dQ by f32 atomics.
//  - decode (the same bf16 shapes with Tq <= 4 query rows over Tk >= 1024 keys): the split-KV
//    forward of attention_decode_cuda.cu (blocks over key ranges x kv heads x sequences, then a
//    log-sum-exp merge), since the tile forward has only B H blocks there (AMOR_ATTENTION_DECODE,
//    decode_path below); the backward is the tile one.
//  - anything else (f32, other head dims, unaligned views): SIMT kernels below, one warp per
//    (query row, head) or (key, kv head), f32 arithmetic throughout; they exist for exactness
//    checks and odd shapes, not for speed.
//  - over a KV cache's storage with per-sequence lengths on the device (attention_forward_cache:
//    a decode step of every sequence in one launch, capturable in a CUDA graph): the split-KV
//    kernel for bf16, head dim 64/128, Tq <= 4, planned for the capacity; else the SIMT forward.
//
// The gate (AMOR: Q, attention and O only at firing rows): compact_firing_rows writes, per
// sequence, the indices of its firing rows in increasing order and their count (then its
// gated-off rows); the tensor-core kernels tile over the firing rows only (a tile is 128 firing
// rows, each keeping its own causal limit = its position), so their cost scales with the number
// of firing rows. Tq = 1 (decode over a KV cache) is one row per sequence: a single partly filled
// tile. Layouts, AMOR_ATTENTION_GATED=balanced|fused|fused64|old (default balanced: it passed the
// realistic GPU parity cases on the H200 in session 7 and is deterministic; dense attention is
// the same under all; gated_layout below says what each runs):
//
//  old       o, lse (forward) and dq (backward) are cleared by memsets of the whole tensors; the
//            forward and dq tiles start at the first firing row, so the last tile of a sequence
//            is the partial one; warp w of a tile takes its rows 32w .. 32w + 31; the block grid
//            is (tile, h, b); delta = rowsum(dO * O) at every row; the dk/dv kernel gathers each
//            step's rows through the row list (row index, then lse and delta: dependent loads).
//  balanced  Why: at 22% firing a tile's 128 rows span ~580 positions (~9 key tiles of 64), so
//            in the old layout warp 0 of a tile is done after ~1/4 of the keys warp 3 needs and
//            the block's time is its last warp's; and the partial tile, the last, is the longest
//            (keys up to T) while holding few rows. Time model (block time = its longest warp,
//            in key tiles, summed over a sequence's tiles at T = 2048, ~450 firing rows): old 87,
//            balanced 62; the useful work is 56.
//            - tiles are cut from the last firing row backwards, so the partial tile is the
//              first (shortest) one; the grid is (h, b, tile) with tile 0 the longest, so the
//              longest tiles of every (b, h) start first and the empty blocks (tiles beyond a
//              sequence's firing rows) come last;
//            - warp w takes m-tiles w and 7 - w (16 rows each) of the tile, an early and a late
//              one, and stops computing the early one after its last row's key tile: every warp
//              has about the same work (2 a + 7 s key tiles, where m-tile i needs a + i s);
//            - the forward and dq kernels zero o, lse and dq at the gated-off rows themselves
//              (each block a share of the off rows of its (b, h)), in place of memsets of whole
//              tensors (B T H D bf16 written twice per step, ~30 us at B T = 16K, H D = 2048);
//            - the backward computes delta only at the firing rows, and with lse (log2 units)
//              and the rows' positions in compacted order (row_stats_bf16x8_kernel), from which
//              the dk/dv kernel loads each step's statistics and row positions by cp.async, two
//              steps ahead, instead of the dependent loads of the old layout; its grid is
//              (g, b, key tile), the first key tiles (most rows) of every (b, g) first.
//  fused     the balanced layout (the same forward) with a fused backward: the dk/dv kernel also
//            adds dS K (dQ / scale) of every step into an f32 accumulator of the compacted rows
//            (B H S D floats of the delta scratch, zeroed at the firing rows by the row_stats
//            kernel) by atomics, and dq_finish writes dq (scaled, bf16) at the firing rows and
//            zeros at the others. No dq kernel: 0.74x the backward's MMAs at 22% firing (see
//            below); not bitwise deterministic (the order of the f32 additions varies).
//
// Memory traffic (tensor-core path, T = Tq = Tk, per (b, h)): the forward reads Q once and each
// K/V tile once per query tile that needs it (about T^2 / 64 / 2 rows of K and V, mostly from L2),
// writes o and lse once. The backward reads Q, dO (dk/dv kernel) and K, V (dq kernel) the same
// way, plus lse and delta (rowsum(dO * O), one f32 per row, from delta_kernel).
//
// FLOPs (causal, T = Tq = Tk): forward 4 B H T^2 D / 2 (two T x T x D products, half of them
// masked away); backward 2.5x that (five products; the separate dq kernel recomputes S and dP,
// which makes seven in fact: the price of a deterministic backward without an f32 dQ scratch).
// The fused gated backward (AMOR_ATTENTION_GATED=fused, the default for gated rows) adds dQ
// with f32 atomics inside the dk/dv kernel, as FlashAttention-2 does, and does five.
//
// Where the gated time goes (H200, B8 T2048 H32 D64, 22% firing: ~451 firing rows per (b, h),
// 4.64e5 causal (row, key) pairs; counted by a model of the tiles, not profiled). In m16n8k16
// MMAs per (b, h): forward 30.8K executed for 29.0K useful (6% mask waste); balanced backward
// dk/dv 65.4K (4 products, 13% waste: 32-row steps against 32-key warps) + dq 45.6K = 111K, i.e.
// 1.16e11 FLOP over 256 (b, h) in ~735 us = 158 TF/s executed (forward 129 TF/s); fused 81.7K
// (0.74x: the dq kernel's S and dP recomputation gone, one 32-MMA dQ product per warp and step
// added). The MMA rate, not the count, is what separates these kernels from cuDNN (330-450 TF/s):
// every tensor-core kernel here takes 238-255 registers per thread (ptxas), so 2 blocks of 4
// warps per SM, 2 warps per scheduler, too few to hide the ldmatrix -> mma -> exp2 -> mma chains
// and the per-step barriers.
//
// Shared-memory traffic per FLOP, which bounded the earlier 64 x 64-tile version (16 rows per
// warp): forward D = 64 reads 16 KB of K/V fragments per 32 x 64 x 64 tile pair of products
// (31 B per kFLOP, half the former 62); dq D = 64 31 B/kFLOP (was 71); dk/dv D = 64 46 (was 69).
#include <cmath>
#include <string>

#include "kernels/attention/attention_cuda.h"
#include "kernels/attention/attention_decode.cuh"
#include "kernels/attention/attention_tc.cuh"
#include "kernels/cast/cuda_device.cuh"
#include "kernels/core/env_switch.h"

namespace amor::cuda {
namespace {

constexpr int kCompactThreads = 256;

// rows[b * Tq + r], r < count[b]: the firing rows of sequence b in increasing order; then, at
// r >= count[b], its gated-off rows in increasing order (the balanced kernels zero their outputs
// there). One block per sequence; thread t takes a contiguous chunk of rows, counts, the block
// scans the counts, and each thread writes its chunk's indices from its offsets.
__global__ void __launch_bounds__(kCompactThreads)
    compact_firing_rows_kernel(const uint8_t* __restrict__ gate, int Tq, int32_t* __restrict__ rows,
                               int32_t* __restrict__ count) {
  __shared__ int s_off[kCompactThreads + 1];
  const int b = blockIdx.x, t = threadIdx.x;
  const int per = (Tq + kCompactThreads - 1) / kCompactThreads;
  const int lo = t * per < Tq ? t * per : Tq, hi = lo + per < Tq ? lo + per : Tq;
  const uint8_t* gb = gate + int64_t(b) * Tq;
  int c = 0;
  for (int i = lo; i < hi; ++i) c += gb[i] != 0;
  s_off[t + 1] = c;
  __syncthreads();
  if (t == 0) {
    s_off[0] = 0;
    for (int i = 1; i <= kCompactThreads; ++i) s_off[i] += s_off[i - 1];
    count[b] = s_off[kCompactThreads];
  }
  __syncthreads();
  int32_t* out = rows + int64_t(b) * Tq + s_off[t];
  int32_t* out_off = rows + int64_t(b) * Tq + s_off[kCompactThreads] + (lo - s_off[t]);
  for (int i = lo; i < hi; ++i) {
    if (gb[i] != 0) {
      *out++ = i;
    } else {
      *out_off++ = i;
    }
  }
}

// delta[(b * H + h) * Tq + i] = sum_d dout[b,i,h,d] o[b,i,h,d] (f32), one warp per row; rows are
// the [B*Tq*H] rows of o in memory order.
template <class T>
__global__ void delta_kernel(const T* __restrict__ o, const T* __restrict__ dout, int64_t nrows,
                             int Tq, int H, int D, float* __restrict__ delta) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); row < nrows;
       row += warps) {
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) s += to_f32(o[row * D + d]) * to_f32(dout[row * D + d]);
    s = warp_sum(s);
    if (lane == 0) {
      const int64_t h = row % H, bi = row / H, i = bi % Tq, b = bi / Tq;
      delta[(b * H + h) * Tq + i] = s;
    }
  }
}

// delta as delta_kernel, for bf16 rows whose D is a multiple of 8 with D / 8 a power of two <= 32
// (16-byte aligned o, dout): D / 8 lanes per row, each with one 16-byte load of o and of dout, so
// a warp takes 32 / (D / 8) rows at a time (4 at D = 64) in full-width loads.
__global__ void delta_bf16x8_kernel(const bf16_t* __restrict__ o, const bf16_t* __restrict__ dout,
                                    int64_t nrows, int Tq, int H, int D,
                                    float* __restrict__ delta) {
  const int lanes = D / 8, lane = threadIdx.x & 31, sub = lane % lanes, rows_per_warp = 32 / lanes;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t base = (int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) *
                      rows_per_warp;
       base < nrows; base += warps * rows_per_warp) {  // warp-uniform bound: shuffles stay full
    const int64_t row = base + lane / lanes;
    float s = 0.0f;
    if (row < nrows) {
      float a[8], b[8];
      load_vec<bf16_t, 8>(o + row * D + sub * 8, a);
      load_vec<bf16_t, 8>(dout + row * D + sub * 8, b);
#pragma unroll
      for (int i = 0; i < 8; ++i) s += a[i] * b[i];
    }
    s = subwarp_sum(s, lanes);
    if (sub == 0 && row < nrows) {
      const int64_t h = row % H, bi = row / H, i = bi % Tq, b = bi / Tq;
      delta[(b * H + h) * Tq + i] = s;
    }
  }
}

// The balanced gated backward's per-row statistics in compacted order (attn::stat_stride(Tq) = S
// entries per sequence or (sequence, head), a multiple of 4 so 16-byte copies stay aligned, and
// >= Tq + 32 so a 32-row step that starts at a firing row never reads past its sequence):
//   pos_c[b * S + r]          = rows[b * Tq + r] + Tk - Tq  (r < count[b]; else -1)
//   delta_c[(b * H + h) S + r] = rowsum(dout * o) of that row     (else 0)
//   lse_c[(b * H + h) S + r]   = lse * log2(e) of that row         (else 0)
// so that the dk/dv kernel loads a step's rows by cp.async from contiguous arrays, without the
// dependent global loads (row index, then lse and delta) a gather would stall on. Lanes and
// vector loads as delta_bf16x8_kernel, over the slots (b, r, h), h fastest. With the fused
// backward it also zeroes the f32 dQ accumulator dq_acc[(b * H + h) S + r][D] of the firing rows
// (the only rows the fused kernel adds to and dq_finish reads).
__global__ void row_stats_bf16x8_kernel(const bf16_t* __restrict__ o,
                                        const bf16_t* __restrict__ dout,
                                        const float* __restrict__ lse,
                                        const int32_t* __restrict__ rows,
                                        const int32_t* __restrict__ count, int B, int Tq, int H,
                                        int D, int S, int offset, int32_t* __restrict__ pos_c,
                                        float* __restrict__ delta_c, float* __restrict__ lse_c,
                                        float* __restrict__ dq_acc) {
  const int lanes = D / 8, lane = threadIdx.x & 31, sub = lane % lanes, rows_per_warp = 32 / lanes;
  const int64_t nslots = int64_t(B) * S * H;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t base = (int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) *
                      rows_per_warp;
       base < nslots; base += warps * rows_per_warp) {  // warp-uniform bound: shuffles stay full
    const int64_t slot = base + lane / lanes;
    const int h = int(slot % H), r = int((slot / H) % S), b = int(slot / (int64_t(H) * S));
    const bool fires = slot < nslots && r < count[b];
    const int qi = fires ? rows[int64_t(b) * Tq + r] : 0;
    float dot = 0.0f;
    if (fires) {
      const int64_t row = ((int64_t(b) * Tq + qi) * H + h) * D;
      float a[8], c[8];
      load_vec<bf16_t, 8>(o + row + sub * 8, a);
      load_vec<bf16_t, 8>(dout + row + sub * 8, c);
#pragma unroll
      for (int i = 0; i < 8; ++i) dot += a[i] * c[i];
      if (dq_acc != nullptr) {
        float* z = dq_acc + ((int64_t(b) * H + h) * S + r) * D + sub * 8;
        reinterpret_cast<float4*>(z)[0] = reinterpret_cast<float4*>(z)[1] =
            make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
    dot = subwarp_sum(dot, lanes);
    if (sub == 0 && slot < nslots) {
      const int64_t at = (int64_t(b) * H + h) * S + r;
      delta_c[at] = dot;
      lse_c[at] = fires ? lse[(int64_t(b) * H + h) * Tq + qi] * attn::kLog2e : 0.0f;
      if (h == 0) pos_c[int64_t(b) * S + r] = fires ? qi + offset : -1;
    }
  }
}

// The fused gated backward's last step: dq[b, rows[b Tq + r], h] = scale * dq_acc[(b H + h) S + r]
// as bf16 at the firing rows (r < count[b]) and 0 at the gated-off ones (listed after them), so
// every row of dq is written once. D / 8 threads per (b, r, h), 8 elements each (two 16-byte f32
// loads, one 16-byte store); h fastest, so a warp writes whole consecutive rows of dq.
__global__ void dq_finish_bf16x8_kernel(const float* __restrict__ dq_acc,
                                        const int32_t* __restrict__ rows,
                                        const int32_t* __restrict__ count, int B, int Tq, int H,
                                        int D, int S, float scale, bf16_t* __restrict__ dq) {
  const int lanes = D / 8;
  const int64_t n = int64_t(B) * Tq * H * lanes;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int sub = int(i % lanes);
    const int64_t slot = i / lanes;
    const int h = int(slot % H), r = int((slot / H) % Tq), b = int(slot / (int64_t(H) * Tq));
    const int qi = rows[int64_t(b) * Tq + r];
    uint4 out = make_uint4(0u, 0u, 0u, 0u);
    if (r < count[b]) {
      const float4* a =
          reinterpret_cast<const float4*>(dq_acc + ((int64_t(b) * H + h) * S + r) * D + sub * 8);
      const float4 x = a[0], y = a[1];
      out.x = mma::pack_bf16x2(x.x * scale, x.y * scale);
      out.y = mma::pack_bf16x2(x.z * scale, x.w * scale);
      out.z = mma::pack_bf16x2(y.x * scale, y.y * scale);
      out.w = mma::pack_bf16x2(y.z * scale, y.w * scale);
    }
    *reinterpret_cast<uint4*>(dq + ((int64_t(b) * Tq + qi) * H + h) * D + sub * 8) = out;
  }
}

bool delta_vectorizable(DType t, int64_t D, const void* o, const void* dout) {
  const int64_t lanes = D / 8;
  return t == DType::BF16 && D % 8 == 0 && lanes >= 1 && lanes <= 32 &&
         (lanes & (lanes - 1)) == 0 && aligned16(o) && aligned16(dout);
}

// ---- SIMT kernels: one warp per block. Head dim D <= kMaxD; lane owns dims lane + 32 c.
constexpr int kMaxD = 256, kDimsPerLane = kMaxD / 32;

template <class T>
__device__ __forceinline__ float dot_row(const float* a_shared, const T* b, int D) {
  float s = 0.0f;
  for (int d = 0; d < D; ++d) s += a_shared[d] * to_f32(b[d]);
  return s;
}

// Forward, block (i, h, b): pass 1 finds lse (each lane an online max/sum over keys lane, lane +
// 32, ..., then combined), pass 2 adds p_j v_j with p_j = exp(s_j - lse) in chunks of 32 keys.
// lengths (over a KV cache's storage, attention_forward_cache): null, or i32 [B] on the device,
// sequence b's keys being the first lengths[b] of its Tk rows.
template <class T>
__global__ void __launch_bounds__(32)
    simt_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const uint8_t* __restrict__ gate, const int32_t* __restrict__ lengths,
                        int Tq, int Tk, int H, int Hkv, int D, float scale, T* __restrict__ o,
                        float* __restrict__ lse) {
  __shared__ float s_q[kMaxD];
  __shared__ float s_p[32];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x;
  const int g = h / (H / Hkv), last = i + (lengths != nullptr ? lengths[b] : Tk) - Tq;
  const int64_t row = ((int64_t(b) * Tq + i) * H + h) * D;
  const int64_t lse_at = (int64_t(b) * H + h) * Tq + i;
  if (gate && gate[int64_t(b) * Tq + i] == 0) {
    for (int d = lane; d < D; d += 32) o[row + d] = from_f32<T>(0.0f);
    if (lane == 0) lse[lse_at] = 0.0f;
    return;
  }
  for (int d = lane; d < D; d += 32) s_q[d] = to_f32(q[row + d]);
  __syncthreads();
  auto key = [&](int j) { return k + ((int64_t(b) * Tk + j) * Hkv + g) * D; };
  float m = -INFINITY, l = 0.0f;
  for (int j = lane; j <= last; j += 32) {
    const float s = scale * dot_row(s_q, key(j), D);
    const float mn = fmaxf(m, s);
    l = l * expf(m - mn) + expf(s - mn);
    m = mn;
  }
  float mall = m;
  for (int off = 16; off > 0; off >>= 1) mall = fmaxf(mall, __shfl_xor_sync(0xffffffffu, mall, off));
  float lsum = m == -INFINITY ? 0.0f : l * expf(m - mall);
  lsum = warp_sum(lsum);
  const float L = mall + logf(lsum);
  float acc[kDimsPerLane] = {};
  for (int j0 = 0; j0 <= last; j0 += 32) {
    const int j = j0 + lane;
    s_p[lane] = j <= last ? expf(scale * dot_row(s_q, key(j), D) - L) : 0.0f;
    __syncthreads();
    const int n = last - j0 + 1 < 32 ? last - j0 + 1 : 32;
    for (int jj = 0; jj < n; ++jj) {
      const T* vr = v + ((int64_t(b) * Tk + j0 + jj) * Hkv + g) * D;
      for (int c = 0; c * 32 + lane < D; ++c) acc[c] += s_p[jj] * to_f32(vr[c * 32 + lane]);
    }
    __syncthreads();
  }
  for (int c = 0; c * 32 + lane < D; ++c) o[row + c * 32 + lane] = from_f32<T>(acc[c]);
  if (lane == 0) lse[lse_at] = L;
}

// dq, block (i, h, b): per chunk of 32 keys each lane computes dS_j = p_j (dP_j - delta); then
// dq += dS_j k_j over the chunk.
template <class T>
__global__ void __launch_bounds__(32)
    simt_dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   const uint8_t* __restrict__ gate, const float* __restrict__ lse,
                   const float* __restrict__ delta, const T* __restrict__ dout, int Tq, int Tk,
                   int H, int Hkv, int D, float scale, T* __restrict__ dq) {
  __shared__ float s_q[kMaxD];
  __shared__ float s_do[kMaxD];
  __shared__ float s_ds[32];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x;
  const int g = h / (H / Hkv), last = i + Tk - Tq;
  const int64_t row = ((int64_t(b) * Tq + i) * H + h) * D;
  if (gate && gate[int64_t(b) * Tq + i] == 0) {
    for (int d = lane; d < D; d += 32) dq[row + d] = from_f32<T>(0.0f);
    return;
  }
  for (int d = lane; d < D; d += 32) {
    s_q[d] = to_f32(q[row + d]);
    s_do[d] = to_f32(dout[row + d]);
  }
  __syncthreads();
  const float L = lse[(int64_t(b) * H + h) * Tq + i], dl = delta[(int64_t(b) * H + h) * Tq + i];
  float acc[kDimsPerLane] = {};
  for (int j0 = 0; j0 <= last; j0 += 32) {
    const int j = j0 + lane;
    float ds = 0.0f;
    if (j <= last) {
      const int64_t kv = ((int64_t(b) * Tk + j) * Hkv + g) * D;
      const float p = expf(scale * dot_row(s_q, k + kv, D) - L);
      ds = p * (dot_row(s_do, v + kv, D) - dl);
    }
    s_ds[lane] = ds;
    __syncthreads();
    const int n = last - j0 + 1 < 32 ? last - j0 + 1 : 32;
    for (int jj = 0; jj < n; ++jj) {
      const T* kr = k + ((int64_t(b) * Tk + j0 + jj) * Hkv + g) * D;
      for (int c = 0; c * 32 + lane < D; ++c) acc[c] += s_ds[jj] * to_f32(kr[c * 32 + lane]);
    }
    __syncthreads();
  }
  for (int c = 0; c * 32 + lane < D; ++c) dq[row + c * 32 + lane] = from_f32<T>(scale * acc[c]);
}

// dk, dv, block (j, g, b): over the group's heads and the rows i that see key j (firing ones),
// 32 rows at a time: lane computes p and dS of its row; then dv += p dO_i, dk += dS q_i.
template <class T>
__global__ void __launch_bounds__(32)
    simt_dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     const uint8_t* __restrict__ gate, const float* __restrict__ lse,
                     const float* __restrict__ delta, const T* __restrict__ dout, int Tq, int Tk,
                     int H, int Hkv, int D, float scale, T* __restrict__ dk, T* __restrict__ dv) {
  __shared__ float s_k[kMaxD];
  __shared__ float s_v[kMaxD];
  __shared__ float s_p[32];
  __shared__ float s_ds[32];
  __shared__ int s_i[32];
  const int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z, lane = threadIdx.x;
  const int group = H / Hkv, offset = Tk - Tq;
  const int64_t kv = ((int64_t(b) * Tk + j) * Hkv + g) * D;
  for (int d = lane; d < D; d += 32) {
    s_k[d] = to_f32(k[kv + d]);
    s_v[d] = to_f32(v[kv + d]);
  }
  __syncthreads();
  float ak[kDimsPerLane] = {}, av[kDimsPerLane] = {};
  const int first = j - offset > 0 ? j - offset : 0;  // the first row that sees key j
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i0 = first; i0 < Tq; i0 += 32) {
      const int i = i0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (i < Tq && !(gate && gate[int64_t(b) * Tq + i] == 0)) {
        const int64_t row = ((int64_t(b) * Tq + i) * H + h) * D;
        const int64_t st = (int64_t(b) * H + h) * Tq + i;
        p = expf(scale * dot_row(s_k, q + row, D) - lse[st]);
        ds = p * (dot_row(s_v, dout + row, D) - delta[st]);
      }
      s_p[lane] = p;
      s_ds[lane] = ds;
      s_i[lane] = i;
      __syncthreads();
      const int n = Tq - i0 < 32 ? Tq - i0 : 32;
      for (int ii = 0; ii < n; ++ii) {
        if (s_p[ii] == 0.0f && s_ds[ii] == 0.0f) continue;  // gated off (or underflow: adds 0)
        const int64_t row = ((int64_t(b) * Tq + s_i[ii]) * H + h) * D;
        for (int c = 0; c * 32 + lane < D; ++c) {
          av[c] += s_p[ii] * to_f32(dout[row + c * 32 + lane]);
          ak[c] += s_ds[ii] * to_f32(q[row + c * 32 + lane]);
        }
      }
      __syncthreads();
    }
  }
  for (int c = 0; c * 32 + lane < D; ++c) {
    dk[kv + c * 32 + lane] = from_f32<T>(scale * ak[c]);
    dv[kv + c * 32 + lane] = from_f32<T>(av[c]);
  }
}

dim3 row_grid(int64_t a, int64_t b, int64_t c) { return dim3(unsigned(a), unsigned(b), unsigned(c)); }

// AMOR_ATTENTION_GATED (environment, read at every call) picks the layout of the gated rows:
//   balanced (default: unset or empty) the balanced layout (see the top of the file) with the
//            deterministic dk/dv and dq kernels (passed the realistic GPU parity cases
//            CudaParity.Attention and AttentionGate on the H200 in session 7; 979 us fwd + bwd at
//            B8 T2048 H32 D64, 22% firing). The default because training stays bitwise
//            reproducible: the fused backwards below add dQ in a varying order;
//   fused    the balanced layout with the fused backward: one dk/dv kernel that also adds dQ
//            by f32 atomics into a compacted f32 accumulator (attention_bwd_cuda.cu), then
//            dq_finish: 5 products per tile pair instead of 7; not bitwise deterministic. Passed
//            CudaParity.Attention, AttentionGate and AttentionSmall* on the H200 (session 8):
//            827 us fwd + bwd at B8 T2048 H32 D64 22% firing (balanced 984), 16-17% faster
//            than balanced at every T from 2K to 16K;
//   fused64  fused with smaller tiles at D = 64: 64-row forward blocks (16 rows per warp) and
//            64-key dk/dv blocks (16 keys per warp): about 2/3 of the registers, so 4 (forward)
//            and 3 (backward) blocks per SM in place of 2, at the price of one MMA per
//            shared-memory fragment and twice the dQ atomics;
//   old      the earlier layout (memsets of o, lse, dq; 128-row tiles from the first firing row;
//            warps on consecutive rows; delta at every row; 1070 us there).
// The forward is the same under fused and balanced; dense attention the same under all of them.
// Sequences longer than 64 * 65535 keys (the balanced grids' tiles in z) take the old layout.
enum class GatedLayout { kOld, kBalanced, kFused, kFused64 };
GatedLayout gated_layout(const AttnDims& n) {
  const std::string e = env_choice("AMOR_ATTENTION_GATED", {"balanced", "fused", "fused64", "old"}, "balanced");
  const GatedLayout l = e == "fused"     ? GatedLayout::kFused
                        : e == "fused64" ? GatedLayout::kFused64
                        : e == "old"     ? GatedLayout::kOld
                                         : GatedLayout::kBalanced;
  return n.Tk <= 64 * 65535LL ? l : GatedLayout::kOld;
}
// The layouts whose backward adds dQ by f32 atomics into a compacted accumulator (delta's tail).
bool adds_dq_by_atomics(GatedLayout l) { return l == GatedLayout::kFused || l == GatedLayout::kFused64; }

// AMOR_ATTENTION_DECODE (environment, read at every call) picks the forward of few query rows
// (Tq <= 4) over a KV cache, for the shapes the tensor-core path takes:
//   auto  (default: unset or empty) the split-KV kernel (attention_decode_cuda.cu) from Tk =
//         kDecodeMinTk keys on, the tile forward below that (its B H blocks are enough there, and
//         the split kernel's merge would be a larger share of the time);
//   split the split-KV kernel at every Tk (so the small parity cases exercise it);
//   tiles the tile forward (attention_fwd_cuda.cu), as before the split kernel, for comparison.
constexpr int64_t kDecodeMinTk = 1024;
bool decode_path(DType t, const AttnDims& n) {
  if (t != DType::BF16 || attn::decode_plan(n).rows == 0) return false;
  const std::string e = env_choice("AMOR_ATTENTION_DECODE", {"auto", "split", "tiles"}, "auto");
  return e == "split" || (e == "auto" && n.Tk >= kDecodeMinTk);
}

void compact_rows(const uint8_t* gate, int32_t* row_scratch, const AttnDims& n, cudaStream_t s) {
  compact_firing_rows_kernel<<<unsigned(n.B), kCompactThreads, 0, s>>>(
      gate, int(n.Tq), row_scratch, row_scratch + n.B * n.Tq);
  AMOR_CUDA_CHECK_LAUNCH();
}

// The SIMT forward (any storage dtype and head dim): one warp per (query row, head, sequence);
// lengths null, or over a KV cache's storage i32 [B] on the device.
void launch_simt_forward(DType t, const char* op, const void* q, const void* k, const void* v,
                         const uint8_t* gate, const int32_t* lengths, float scale, void* o,
                         float* lse, const AttnDims& n, cudaStream_t s) {
  dispatch_storage(t, op, [&](auto tag) {
    using T = decltype(tag);
    simt_forward_kernel<T><<<row_grid(n.Tq, n.H, n.B), 32, 0, s>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), gate,
        lengths, int(n.Tq), int(n.Tk), int(n.H), int(n.Hkv), int(n.D), scale,
        static_cast<T*>(o), lse);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

// rows (B*Tq), count (B), padding to a multiple of 4, pos_c (B*S): see row_stats_bf16x8_kernel.
int64_t attention_row_scratch_ints(const AttnDims& n) {
  return (n.B * n.Tq + n.B + 3) / 4 * 4 + n.B * attn::stat_stride(int(n.Tq));
}

// delta (B*H*Tq) of the old layout, or delta_c and lse_c (B*H*S each) of the balanced one; with
// a gate also the fused backward's dq_acc (B*H*S*D; 16-byte aligned: S is a multiple of 4).
int64_t attention_delta_scratch_floats(const AttnDims& n, bool gated) {
  const int64_t bhs = n.B * n.H * attn::stat_stride(int(n.Tq));
  // The fused gated backwards' compacted f32 dQ accumulator (B H (Tq + 32) D): only when one runs.
  return 2 * bhs + (gated && adds_dq_by_atomics(gated_layout(n)) ? bhs * n.D : 0);
}

int64_t attention_forward_scratch_floats(DType t, const AttnDims& n) {
  return decode_path(t, n) ? attn::decode_scratch_floats(n) : 0;
}

bool attention_uses_tensor_cores(DType t, int64_t D, const void* const* ptrs, int nptrs) {
  if (t != DType::BF16 || (D != 64 && D != 128)) return false;
  for (int i = 0; i < nptrs; ++i)
    if (!aligned16(ptrs[i])) return false;
  return true;
}

void attention_forward(DType t, const void* q, const void* k, const void* v, const uint8_t* gate,
                       float scale, void* o, float* lse, int32_t* row_scratch,
                       float* fwd_scratch, const AttnDims& n, cudaStream_t s) {
  if (n.B == 0 || n.Tq == 0 || n.H == 0) return;
  const void* ptrs[] = {q, k, v, o};
  if (attention_uses_tensor_cores(t, n.D, ptrs, 4) && fwd_scratch != nullptr &&
      decode_path(t, n)) {
    attn::forward_decode(static_cast<const bf16_t*>(q), static_cast<const bf16_t*>(k),
                         static_cast<const bf16_t*>(v), gate, nullptr, scale,
                         static_cast<bf16_t*>(o), lse, fwd_scratch, n, s);
    return;
  }
  if (attention_uses_tensor_cores(t, n.D, ptrs, 4)) {
    const int32_t* rows = nullptr;
    const int32_t* count = nullptr;
    const GatedLayout layout = gate != nullptr ? gated_layout(n) : GatedLayout::kOld;
    const bool bal = layout != GatedLayout::kOld;
    if (gate) {
      const int64_t elems = n.B * n.Tq * n.H * n.D;
      if (!bal) {  // the balanced kernel zeroes the gated-off rows itself
        AMOR_CUDA_CHECK(cudaMemsetAsync(o, 0, size_t(elems) * sizeof(bf16_t), s));
        AMOR_CUDA_CHECK(cudaMemsetAsync(lse, 0, size_t(n.B * n.H * n.Tq) * sizeof(float), s));
      }
      compact_rows(gate, row_scratch, n, s);
      rows = row_scratch;
      count = row_scratch + n.B * n.Tq;
    }
    attn::forward_tc(static_cast<const bf16_t*>(q), static_cast<const bf16_t*>(k),
                     static_cast<const bf16_t*>(v), rows, count, scale, static_cast<bf16_t*>(o),
                     lse, n, bal, layout == GatedLayout::kFused64, s);
    return;
  }
  launch_simt_forward(t, "attention_forward", q, k, v, gate, nullptr, scale, o, lse, n, s);
}

int64_t attention_cache_scratch_floats(DType t, const AttnDims& n) {
  return t == DType::BF16 ? attn::decode_scratch_floats(n) : 0;
}

// The split-KV kernel where it takes the shape (planned for n.Tk = the capacity), else the SIMT
// kernel; both read the lengths on the device, and neither launch depends on them.
void attention_forward_cache(DType t, const void* q, const void* k, const void* v,
                             const int32_t* lengths, const uint8_t* gate, float scale, void* o,
                             float* lse, float* scratch, const AttnDims& n, cudaStream_t s) {
  if (n.B == 0 || n.Tq == 0 || n.H == 0) return;
  const void* ptrs[] = {q, k, v, o};
  if (scratch != nullptr && attention_uses_tensor_cores(t, n.D, ptrs, 4) &&
      attn::decode_plan(n).rows != 0) {
    attn::forward_decode(static_cast<const bf16_t*>(q), static_cast<const bf16_t*>(k),
                         static_cast<const bf16_t*>(v), gate, lengths, scale,
                         static_cast<bf16_t*>(o), lse, scratch, n, s);
    return;
  }
  launch_simt_forward(t, "attention_forward_cache", q, k, v, gate, lengths, scale, o, lse, n, s);
}

void attention_backward(DType t, const void* q, const void* k, const void* v, const uint8_t* gate,
                        const void* o, const float* lse, const void* dout, float scale, void* dq,
                        void* dk, void* dv, int32_t* row_scratch, float* delta,
                        const AttnDims& n, cudaStream_t s) {
  const int64_t qrows = n.B * n.Tq * n.H;
  if (qrows == 0) {  // no query rows: nothing flows into dk, dv
    const size_t bytes = size_t(n.B * n.Tk * n.Hkv * n.D) * (t == DType::BF16 ? 2 : 4);
    if (bytes > 0) {
      AMOR_CUDA_CHECK(cudaMemsetAsync(dk, 0, bytes, s));
      AMOR_CUDA_CHECK(cudaMemsetAsync(dv, 0, bytes, s));
    }
    return;
  }
  const void* ptrs[] = {q, k, v, o, dout, dq, dk, dv};
  const GatedLayout layout = gate != nullptr ? gated_layout(n) : GatedLayout::kOld;
  if (layout != GatedLayout::kOld && attention_uses_tensor_cores(t, n.D, ptrs, 8)) {
    // Balanced gated path: compacted rows and their statistics (and the zeroed dQ accumulator of
    // the fused backward), then the kernels, which zero dq's gated-off rows themselves (the dq
    // kernel, or dq_finish).
    const bool fused = adds_dq_by_atomics(layout);
    compact_rows(gate, row_scratch, n, s);
    const int S = attn::stat_stride(int(n.Tq));
    int32_t* pos_c = row_scratch + (n.B * n.Tq + n.B + 3) / 4 * 4;
    float* delta_c = delta;
    float* lse_c = delta + n.B * n.H * S;
    float* dq_acc = fused ? delta + 2 * n.B * n.H * S : nullptr;
    const int64_t slots = n.B * S * n.H;
    row_stats_bf16x8_kernel<<<grid_for(slots * (n.D / 8), 256), 256, 0, s>>>(
        static_cast<const bf16_t*>(o), static_cast<const bf16_t*>(dout), lse, row_scratch,
        row_scratch + n.B * n.Tq, int(n.B), int(n.Tq), int(n.H), int(n.D), S,
        int(n.Tk - n.Tq), pos_c, delta_c, lse_c, dq_acc);
    AMOR_CUDA_CHECK_LAUNCH();
    attn::backward_tc_balanced(static_cast<const bf16_t*>(q), static_cast<const bf16_t*>(k),
                               static_cast<const bf16_t*>(v), row_scratch,
                               row_scratch + n.B * n.Tq, pos_c, lse_c, delta_c,
                               static_cast<const bf16_t*>(dout), scale, static_cast<bf16_t*>(dq),
                               static_cast<bf16_t*>(dk), static_cast<bf16_t*>(dv), dq_acc,
                               layout == GatedLayout::kFused64, n, s);
    if (fused) {
      dq_finish_bf16x8_kernel<<<grid_for(n.B * n.Tq * n.H * (n.D / 8), 256), 256, 0, s>>>(
          dq_acc, row_scratch, row_scratch + n.B * n.Tq, int(n.B), int(n.Tq), int(n.H),
          int(n.D), S, scale, static_cast<bf16_t*>(dq));
      AMOR_CUDA_CHECK_LAUNCH();
    }
    return;
  }
  if (delta_vectorizable(t, n.D, o, dout)) {
    delta_bf16x8_kernel<<<grid_for(qrows * (n.D / 8), 256), 256, 0, s>>>(
        static_cast<const bf16_t*>(o), static_cast<const bf16_t*>(dout), qrows, int(n.Tq),
        int(n.H), int(n.D), delta);
    AMOR_CUDA_CHECK_LAUNCH();
  } else {
    dispatch_storage(t, "attention_backward", [&](auto tag) {
      using T = decltype(tag);
      delta_kernel<T><<<grid_for(qrows * 32, 256), 256, 0, s>>>(
          static_cast<const T*>(o), static_cast<const T*>(dout), qrows, int(n.Tq), int(n.H),
          int(n.D), delta);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
  if (attention_uses_tensor_cores(t, n.D, ptrs, 8)) {
    const int32_t* rows = nullptr;
    const int32_t* count = nullptr;
    if (gate) {
      AMOR_CUDA_CHECK(cudaMemsetAsync(dq, 0, size_t(qrows * n.D) * sizeof(bf16_t), s));
      compact_rows(gate, row_scratch, n, s);
      rows = row_scratch;
      count = row_scratch + n.B * n.Tq;
    }
    attn::backward_tc(static_cast<const bf16_t*>(q), static_cast<const bf16_t*>(k),
                      static_cast<const bf16_t*>(v), rows, count, lse, delta,
                      static_cast<const bf16_t*>(dout), scale, static_cast<bf16_t*>(dq),
                      static_cast<bf16_t*>(dk), static_cast<bf16_t*>(dv), n, s);
    return;
  }
  dispatch_storage(t, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    simt_dq_kernel<T><<<row_grid(n.Tq, n.H, n.B), 32, 0, s>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), gate, lse,
        delta, static_cast<const T*>(dout), int(n.Tq), int(n.Tk), int(n.H), int(n.Hkv), int(n.D),
        scale, static_cast<T*>(dq));
    AMOR_CUDA_CHECK_LAUNCH();
    simt_dkdv_kernel<T><<<row_grid(n.Tk, n.Hkv, n.B), 32, 0, s>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), gate, lse,
        delta, static_cast<const T*>(dout), int(n.Tq), int(n.Tk), int(n.H), int(n.Hkv), int(n.D),
        scale, static_cast<T*>(dk), static_cast<T*>(dv));
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace amor::cuda
