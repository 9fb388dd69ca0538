// Split-KV ("flash-decoding") forward of causal GQA attention for a few query rows (Tq <= 4) over
// a long KV cache; math and conventions in attention_ref.h, dispatch in attention_cuda.cu.
//
// Why: the tile forward (attention_fwd_cuda.cu) runs one block per (query tile, head, sequence);
// at Tq = 1 that is B * H blocks (32 at batch 1 of the 1.5B model, for 132 SMs), each walking all
// Tk keys alone: ~0.85 ms per layer at Tk = 32K where reading the layer's K and V (268 MB) takes
// ~56 us at 4.8 TB/s. Here the keys are cut into `splits` ranges and a block works on one range
// for every query row of one kv head (all the query heads of the GQA group and all Tq positions,
// so K and V are read once per group), which fills the GPU at batch 1; a second kernel merges the
// ranges.
//
// Split kernel, block (split c, kv head g and chunk of rows, sequence b), keys [c L, c L + L)
// (L = split_len, a multiple of the key tile), rows r = (query head in group, query position t),
// each with its causal limit Tk - Tq + t (gated-off rows: no keys). In log2 units (q is scaled by
// scale * log2 e when staged), per key tile of BN keys:
//
//   x_rj = <q_r, k_j>              (-inf past the row's limit or the range's end)
//   m'_r = max(m_r, max_j x_rj),  p_rj = exp2(x_rj - m'_r),  alpha_r = exp2(m_r - m'_r)
//   l_r  = alpha_r l_r + sum_j p_rj,  O_r = alpha_r O_r + sum_j p_rj v_j
//
// and at the end the block writes the unnormalised O_r (f32, D floats) and (m_r, l_r) of its
// range. Combine kernel, one warp per row (b, h, t), over the ranges c with l_c > 0 (a range
// holding none of the row's keys has l = 0 and m = -inf and is skipped):
//
//   M = max_c m_c,  L = sum_c l_c exp2(m_c - M),  o = sum_c exp2(m_c - M) O_c / L
//   lse = (M + log2 L) ln 2                       (natural log, as the tile kernels write)
//
// and o = 0, lse = 0 at gated-off rows. Every row sees key 0, so L > 0 at a firing row. Fixed
// order everywhere: deterministic. A block none of whose rows sees a key of its range (all gated
// off, or, over a KV cache, a range past the sequence's length) writes only (m, l) = (-inf, 0)
// and exits.
//
// Over a KV cache (attention_forward_cache, models/infer/kv_cache.h): k, v are the cache's
// storage [B, C, Hkv, D] and sequence b's keys are its first lengths[b] rows, lengths i32 [B] read
// on the device. The plan (ranges, blocks) is made for Tk = C, not for the lengths, so the launch
// is the same at every decode step while the cache fills (a CUDA graph replays it); the ranges a
// sequence has not reached yet cost a block that exits. Row (b, t)'s limit is lengths[b] - Tq + t.
//
// Memory: K and V tiles (BN keys x D, 8 KB each: BN = 64 at D = 64, 32 at D = 128) stream through
// a 3-stage cp.async ring (16-byte copies, two tiles in flight while one is used), rows padded by
// 16 bytes so that the 16-byte shared reads of 8 consecutive rows hit different banks. The
// arithmetic is SIMT f32 (the work is bandwidth-bound: 2 FLOP per K/V byte per query row, while
// an H200 does ~60 TF/s of f32 FMA against 4.8 TB/s, i.e. ~12 FLOP per byte): per tile, scores by
// thread (key, a share of the rows: each K chunk converted once for them), softmax statistics by
// one warp per row, P V by thread (16-byte column chunk, key subset), each thread keeping its
// chunk of every row's O in registers; the key subsets are summed through shared memory once at
// the end. At 8 rows per block (GQA groups, Tq > 1) the SIMT work per tile is ~4x that of one row
// and may approach the tile's share of the memory time; mma.sync would take it off the issue
// slots (not done: Tq = 1 MHA is the target here). The partial outputs (B H Tq splits (D + 2)
// floats) are ~0.5% of the K/V bytes at a split length of 2K keys.
//
// Splits: about one wave of blocks (3 resident per SM counted; shared memory: 54 KB of ring plus
// 0.5 - 4 KB static per block, so 4 fit at one row per block), and at least
// 256 keys per range; a tail wave of a few blocks would stream at the bandwidth of those few
// blocks' copies in flight (two 16 KB tiles each), so the count is rounded down to one full wave
// rather than up.
#include <cmath>

#include "kernels/attention/attention_decode.cuh"
#include "kernels/core/env_switch.h"
#include "kernels/core/mma.cuh"

namespace amor::cuda::attn {
namespace {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kStages = 3;
constexpr int kResidentBlocks = 3;  // per SM, by shared memory (see forward_decode)
constexpr int kMinSplitKeys = 256;
constexpr int kMaxSplits = 1024;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int kKeys = 4096 / D;  // keys per tile: 8 KB of K and 8 KB of V
template <int D>
constexpr int kLd = D + 8;  // shared row stride (bf16): 16 bytes of padding
template <int D>
constexpr int kChunks = D / 8;  // 16-byte chunks per row
template <int D>
constexpr int kKeyGroups = kThreads / kChunks<D>;  // P V: thread (chunk, key group)

template <int D>
constexpr int smem_bytes() {
  return kStages * 2 * kKeys<D> * kLd<D> * int(sizeof(bf16_t));
}

// 8 bf16 (one 16-byte chunk) to f32: a bf16 is the upper half of the f32 with the same bits.
__device__ __forceinline__ void bf16x8_to_f32(const uint4& raw, float (&f)[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = w[i] << 16, hi = w[i] & 0xffff0000u;
    memcpy(&f[2 * i], &lo, 4);
    memcpy(&f[2 * i + 1], &hi, 4);
  }
}

// Block (split, g * chunks + chunk, b); R query rows per block. part_o [B,H,Tq][splits][D] and
// part_ml [B,H,Tq][splits][2] (m in log2 units, l).
template <int D, int R>
__global__ void __launch_bounds__(kThreads)
    decode_split_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                        const bf16_t* __restrict__ v, const uint8_t* __restrict__ gate,
                        const int32_t* __restrict__ lengths, int Tq, int Tk, int H, int Hkv,
                        int chunks, int split_len, int splits, float scale_log2,
                        float* __restrict__ part_o, float* __restrict__ part_ml) {
  constexpr int BN = kKeys<D>, LD = kLd<D>, KG = kKeyGroups<D>;
  constexpr int RG = kThreads / BN, RPT = (R + RG - 1) / RG;  // scores: row groups, rows each
  extern __shared__ uint4 smem_raw[];
  __shared__ float s_q[R][D];   // the rows' queries, times scale log2 e
  __shared__ float s_p[R][BN];  // the tile's scores, then probabilities
  __shared__ float s_m[R], s_l[R], s_alpha[R];
  __shared__ int s_lim[R];      // the row's last visible key; -1: no row, or gated off
  __shared__ int64_t s_row[R];  // the row's index (b H + h) Tq + t; -1: no row
  bf16_t* smem = reinterpret_cast<bf16_t*>(smem_raw);
  auto sK = [&](int st) { return smem + (2 * st) * BN * LD; };
  auto sV = [&](int st) { return smem + (2 * st + 1) * BN * LD; };

  const int split = blockIdx.x, g = blockIdx.y / chunks, chunk = blockIdx.y % chunks;
  const int b = blockIdx.z, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int G = H / Hkv;
  // The sequence's keys: Tk (also its storage's rows), or over a KV cache lengths[b] of Tk rows.
  const int Tkb = lengths != nullptr ? lengths[b] : Tk;
  if (tid < R) {
    const int rr = chunk * R + tid;  // row in the group: (query head in group) Tq + t
    int lim = -1;
    int64_t row = -1;
    if (rr < G * Tq) {
      const int t = rr % Tq, h = g * G + rr / Tq;
      row = (int64_t(b) * H + h) * Tq + t;
      if (gate == nullptr || gate[int64_t(b) * Tq + t] != 0) lim = Tkb - Tq + t;
    }
    s_lim[tid] = lim;
    s_row[tid] = row;
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.0f;
  }
  for (int e = tid; e < R * D; e += kThreads) {
    const int i = e / D, d = e % D, rr = chunk * R + i;
    float x = 0.0f;
    if (rr < G * Tq) {
      const int t = rr % Tq, h = g * G + rr / Tq;
      x = to_f32(q[((int64_t(b) * Tq + t) * H + h) * D + d]) * scale_log2;
    }
    s_q[i][d] = x;
  }
  __syncthreads();
  int max_lim = -1;
#pragma unroll
  for (int i = 0; i < R; ++i) max_lim = s_lim[i] > max_lim ? s_lim[i] : max_lim;
  const int start = split * split_len;
  // No row sees a key of this range (it lies past the sequence's keys, or every row is gated
  // off): the neutral statistics (l = 0, which the combine skips, never reading O) and no more.
  if (start > max_lim) {
    if (tid < R && s_row[tid] >= 0) {
      part_ml[(s_row[tid] * splits + split) * 2] = -INFINITY;
      part_ml[(s_row[tid] * splits + split) * 2 + 1] = 0.0f;
    }
    return;
  }
  int end = start + split_len < Tkb ? start + split_len : Tkb;
  end = end < max_lim + 1 ? end : max_lim + 1;  // no row sees a key past max_lim
  const int ntiles = end > start ? (end - start + BN - 1) / BN : 0;

  auto load_tile = [&](int kt, int st) {
    for (int c = tid; c < BN * kChunks<D>; c += kThreads) {
      const int r = c / kChunks<D>, ch = c % kChunks<D>, j = start + kt * BN + r;
      const bool ok = j < end;
      const int64_t off = ok ? ((int64_t(b) * Tk + j) * Hkv + g) * D + ch * 8 : 0;
      mma::cp_async_16(sK(st) + r * LD + ch * 8, k + off, ok);  // zeros past the end
      mma::cp_async_16(sV(st) + r * LD + ch * 8, v + off, ok);
    }
  };
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ntiles) load_tile(st, st);
    mma::cp_async_commit();  // (empty groups too: the wait below counts groups)
  }

  const int ch = tid % kChunks<D>, kg = tid / kChunks<D>;  // P V: this thread's chunk, keys
  float acc[R][8];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[i][e] = 0.0f;

  for (int kt = 0; kt < ntiles; ++kt) {
    mma::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt is in; every thread is done with the stage reloaded next
    if (kt + kStages - 1 < ntiles) load_tile(kt + kStages - 1, (kt + kStages - 1) % kStages);
    mma::cp_async_commit();
    const int st = kt % kStages, j0 = start + kt * BN;

    // Scores: thread (key jj, rows rg, rg + RG, ...); each K chunk is converted once for all of
    // the thread's rows. Keys past the range's end (zero-filled) or a row's limit get -inf.
    {
      const int jj = tid % BN, rg = tid / BN, j = j0 + jj;
      if (rg < R) {  // (fewer rows than row groups: the extra groups idle)
        const bf16_t* krow = sK(st) + jj * LD;
        float x[RPT];
#pragma unroll
        for (int r = 0; r < RPT; ++r) x[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunks<D>; ++c) {
          float kf[8];
          bf16x8_to_f32(*reinterpret_cast<const uint4*>(krow + c * 8), kf);
#pragma unroll
          for (int r = 0; r < RPT; ++r) {
            const int i = rg + r * RG;
            if (i < R) {
#pragma unroll
              for (int e = 0; e < 8; ++e) x[r] += s_q[i][c * 8 + e] * kf[e];
            }
          }
        }
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = rg + r * RG;
          if (i < R) s_p[i][jj] = j < end && j <= s_lim[i] ? x[r] : -INFINITY;
        }
      }
    }
    __syncthreads();
    // Online softmax statistics: one warp per row.
    for (int i = warp; i < R; i += kWarps) {
      float mx = -INFINITY;
      for (int jj = lane; jj < BN; jj += 32) mx = fmaxf(mx, s_p[i][jj]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = s_m[i], m_new = fmaxf(m_old, mx);
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // no key yet: no NaN from -inf - -inf
      float sum = 0.0f;
      for (int jj = lane; jj < BN; jj += 32) {
        const float p = mma::exp2_approx(s_p[i][jj] - base);
        s_p[i][jj] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      mma::sync_warp();  // every lane has read s_m before lane 0 writes it
      if (lane == 0) {
        const float alpha = mma::exp2_approx(m_old - base);
        s_alpha[i] = alpha;
        s_l[i] = s_l[i] * alpha + sum;
        s_m[i] = m_new;
      }
    }
    __syncthreads();
    // O = alpha O + P V: thread (chunk ch, keys kg, kg + KG, ...); V past the end is zero-filled
    // and its p is 0.
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float a = s_alpha[i];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[i][e] *= a;
    }
    for (int jj = kg; jj < BN; jj += KG) {
      float vf[8];
      bf16x8_to_f32(*reinterpret_cast<const uint4*>(sV(st) + jj * LD + ch * 8), vf);
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float p = s_p[i][jj];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[i][e] += p * vf[e];
      }
    }
  }
  mma::cp_async_wait<0>();
  __syncthreads();  // the K/V ring is free: it holds the key groups' partial O now

  // Sum the key groups' O (red[kg][i][D] in the ring's memory: KG R D floats <= 32 KB), then
  // write O and (m, l) of the range.
  float* red = reinterpret_cast<float*>(smem_raw);
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) red[(kg * R + i) * D + ch * 8 + e] = acc[i][e];
  __syncthreads();
  for (int e = tid; e < R * D; e += kThreads) {
    const int i = e / D, d = e % D;
    if (s_row[i] < 0) continue;
    float sum = 0.0f;
    for (int q2 = 0; q2 < KG; ++q2) sum += red[(q2 * R + i) * D + d];
    part_o[(s_row[i] * splits + split) * D + d] = sum;
  }
  if (tid < R && s_row[tid] >= 0) {
    part_ml[(s_row[tid] * splits + split) * 2] = s_m[tid];
    part_ml[(s_row[tid] * splits + split) * 2 + 1] = s_l[tid];
  }
}

// One warp per row (b, h, t) of the B H Tq rows (row = (b H + h) Tq + t); see the top.
template <int D>
__global__ void __launch_bounds__(kThreads)
    decode_combine_kernel(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                          const uint8_t* __restrict__ gate, int64_t nrows, int Tq, int H,
                          int splits, bf16_t* __restrict__ o, float* __restrict__ lse) {
  constexpr int kPer = D / 32;  // dims per lane: lane + 32 c
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= nrows) return;
  const int t = int(row % Tq);
  const int64_t bh = row / Tq, b = bh / H, h = bh % H;
  bf16_t* orow = o + ((b * Tq + t) * H + h) * D;
  if (gate != nullptr && gate[b * Tq + t] == 0) {
#pragma unroll
    for (int c = 0; c < kPer; ++c) orow[lane + 32 * c] = from_f32<bf16_t>(0.0f);
    if (lane == 0) lse[row] = 0.0f;
    return;
  }
  const float* ml = part_ml + row * splits * 2;
  float M = -INFINITY;
  for (int c = lane; c < splits; c += 32)
    if (ml[2 * c + 1] > 0.0f) M = fmaxf(M, ml[2 * c]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
  float L = 0.0f;
  for (int c = lane; c < splits; c += 32)
    if (ml[2 * c + 1] > 0.0f) L += ml[2 * c + 1] * mma::exp2_approx(ml[2 * c] - M);
  L = warp_sum(L);
  float acc[kPer] = {};
  for (int c = 0; c < splits; ++c) {
    if (!(ml[2 * c + 1] > 0.0f)) continue;  // warp-uniform: the same entry in every lane
    const float w = mma::exp2_approx(ml[2 * c] - M);
    const float* po = part_o + (row * splits + c) * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] += w * po[lane + 32 * i];
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) orow[lane + 32 * i] = from_f32<bf16_t>(acc[i] * inv);
  if (lane == 0) lse[row] = L > 0.0f ? (M + log2f(L)) * 0.69314718055994531f : 0.0f;
}

template <int D, int R>
void launch_split(const bf16_t* q, const bf16_t* k, const bf16_t* v, const uint8_t* gate,
                  const int32_t* lengths, float scale, const DecodePlan& p, float* part_o,
                  float* part_ml, const AttnDims& n, cudaStream_t s) {
  constexpr int kSmem = smem_bytes<D>();
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(decode_split_kernel<D, R>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(unsigned(p.splits), unsigned(n.Hkv * p.chunks), unsigned(n.B));
  decode_split_kernel<D, R><<<grid, kThreads, kSmem, s>>>(
      q, k, v, gate, lengths, int(n.Tq), int(n.Tk), int(n.H), int(n.Hkv), p.chunks,
      int(p.split_len), p.splits, scale * kLog2e, part_o, part_ml);
  AMOR_CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_decode(const bf16_t* q, const bf16_t* k, const bf16_t* v, const uint8_t* gate,
                   const int32_t* lengths, float scale, bf16_t* o, float* lse, float* scratch,
                   const DecodePlan& p, const AttnDims& n, cudaStream_t s) {
  const int64_t nrows = n.B * n.H * n.Tq;
  float* part_o = scratch;
  float* part_ml = scratch + nrows * p.splits * D;
  switch (p.rows) {
    case 1: launch_split<D, 1>(q, k, v, gate, lengths, scale, p, part_o, part_ml, n, s); break;
    case 2: launch_split<D, 2>(q, k, v, gate, lengths, scale, p, part_o, part_ml, n, s); break;
    case 4: launch_split<D, 4>(q, k, v, gate, lengths, scale, p, part_o, part_ml, n, s); break;
    default: launch_split<D, 8>(q, k, v, gate, lengths, scale, p, part_o, part_ml, n, s); break;
  }
  decode_combine_kernel<D><<<unsigned(ceil_div(nrows, kWarps)), kThreads, 0, s>>>(
      part_o, part_ml, gate, nrows, int(n.Tq), int(n.H), p.splits, o, lse);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

DecodePlan decode_plan(const AttnDims& n) {
  DecodePlan p;
  if ((n.D != 64 && n.D != 128) || n.Tq < 1 || n.Tq > kDecodeMaxTq || n.B > 65535 ||
      n.Hkv < 1 || n.H % n.Hkv != 0 || n.Tk < 1 || n.Tk > (int64_t(1) << 30))
    return p;
  const int64_t group_rows = n.H / n.Hkv * n.Tq;  // query rows per kv head and sequence
  p.rows = group_rows <= 1 ? 1 : group_rows <= 2 ? 2 : group_rows <= 4 ? 4 : 8;
  p.chunks = int(ceil_div(group_rows, p.rows));
  if (n.Hkv * p.chunks > 65535) return DecodePlan{};
  const int BN = n.D == 64 ? kKeys<64> : kKeys<128>;
  const int64_t base = n.B * n.Hkv * p.chunks;  // blocks per key range
  const int forced = env_int("AMOR_ATTENTION_DECODE_SPLITS", 0, kMaxSplits, 0);
  int64_t want = forced > 0 ? forced : int64_t(num_sms()) * kResidentBlocks / base;
  const int64_t most = forced > 0 ? ceil_div(n.Tk, BN) : ceil_div(n.Tk, kMinSplitKeys);
  want = want < most ? want : most;
  want = want < 1 ? 1 : want;
  p.split_len = ceil_div(ceil_div(n.Tk, want), BN) * BN;
  p.splits = int(ceil_div(n.Tk, p.split_len));
  return p;
}

int64_t decode_scratch_floats(const AttnDims& n) {
  const DecodePlan p = decode_plan(n);
  return p.rows == 0 ? 0 : n.B * n.H * n.Tq * p.splits * (n.D + 2);
}

void forward_decode(const bf16_t* q, const bf16_t* k, const bf16_t* v, const uint8_t* gate,
                    const int32_t* lengths, float scale, bf16_t* o, float* lse, float* scratch,
                    const AttnDims& n, cudaStream_t s) {
  const DecodePlan p = decode_plan(n);
  if (p.rows == 0)
    ::amor::cuda_fail(__FILE__, __LINE__, "attn::forward_decode", "shape outside the split kernel");
  if (n.D == 64) {
    launch_decode<64>(q, k, v, gate, lengths, scale, o, lse, scratch, p, n, s);
  } else {
    launch_decode<128>(q, k, v, gate, lengths, scale, o, lse, scratch, p, n, s);
  }
}

}  // namespace amor::cuda::attn
