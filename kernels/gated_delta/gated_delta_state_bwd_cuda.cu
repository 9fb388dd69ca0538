// The gated delta rule backward's sequential pass with a block per head (or per large slice of
// V): gdn_state_bwd_wide_kernel, for bf16 at the register passes' shapes (reg_state_ok; the
// shared-memory gdn_state_bwd_kernel of gated_delta_bwd_cuda.cu serves every other case).
//
// The math is that pass's (gated_delta_bwd_cuda.cu, step 1): per chunk, in reverse, with P the
// chunk's scale (Q K^T) o D (lower), Q~ = scale diag(e) Q and D_{n-1,j} = exp(gam_{n-1} - gam_j),
//   dVn^T = (dS^T K^T) diag(D_{n-1,.}) + dO^T P     A = dS^T, B = K^T (ldmatrix), then the
//                                                   columns scaled; A = dO^T (ldmatrix.trans of
//                                                   the dO tile), B = P (lower: k steps >= the
//                                                   column step only);
//   dS^T <- e_{n-1} dS^T + dO^T Q~ - dVn^T W        A = dO^T, B = Q~; A = -dVn^T (C fragments),
//                                                   B = W
// with dS^T [V, K] f32 in MMA accumulators, 16 columns of V per warp (kRegCols). dS' (before the
// update) and dVn go to the scratch per chunk; dS after chunk 0 is d_initial_state.
//
// Why whole heads per block: the earlier register pass (gdn_state_bwd_reg_kernel, removed
// 2026-12-02 session 7 after this one passed GPU parity at 465 us against its 1097) ran 4 warps
// per block (64 columns of V) and at K 128 needed 174 KB of shared memory, so an SM held one
// such block: 4 warps, one per scheduler, nothing to hide a chunk step's latencies (ncu
// 2026-12-02, H16 K128 V256 B8 T2048: four waves of 512 blocks, ~16K cycles per chunk step
// against ~5K of MMA issue). Every block also recomputed P and Q~ and reloaded q, k, W for its
// 64 columns (4x per head at V 256). Here the
// warps of all of V (up to kWideMaxWarps = 16: V 256) share one block: P, Q~ and D are computed
// once per chunk by all warps together, q, k, W are loaded once per head, and an SM runs 16 warps
// (4 per scheduler). At H16 B8 that is 128 blocks, one wave on 132 SMs.
//
// What makes 16 warps fit:
//  - registers (512 threads: at most 128 each): dS^T is 64 f32 per lane at K 128. dVn^T is
//    computed in parts of kJp n16 column blocks (one at K 128, two at K <= 64: 8 or 16
//    accumulators instead of 32), dS^T's A fragments packed again per part as they are consumed,
//    dO^T's fragments reloaded for each product that reads them. ptxas still spills a little at
//    K 128 (112 bytes stored, 328 loaded, static counts); AMOR_GDN_SBWD_WARPS=8 takes blocks of
//    8 warps built for 255 registers instead (189, no spills; 152 KB, one block per SM, two per
//    head at V 256);
//  - shared memory (190 KB at K 128, V 256, 16 warps; 104 KB at K 64, V 128, 8 warps: two blocks
//    per SM): q single-buffered (its next copy starts once P and Q~ have read it, behind the
//    chunk's second barrier: the warps' products hide it), k, W, dO, gam double-buffered, and
//    each warp's staging tile (dS' and dVn leave through it) holds one 16-row block instead of K
//    rows.
// Per chunk: two barriers (the chunk's tiles in; P, Q~, D written), then each warp's chain
// without barriers.
//
// Expected (H200, K 128, V 256, chunk 64, B8 T2048 H16): per chunk and SM 176 KB of traffic
// (q, k, W, dO in; dS', dVn out), ~3.4K MMAs (16 warps x 212 + P), ~0.9 MB of ldmatrix reads;
// memory-bound at ~20 B/cycle per SM: ~9K cycles per chunk, 32 chunks, ~160-250 us (was 1097).
// At H24 K64 V128: 192 blocks of 8 warps, 72 KB per chunk and block, ~120-180 us (was 441).
// Measured (ncu, tests/cuda/RESULTS.md, 2026-12-02 session 6): 465.3 us at H16 K128 V256;
// AMOR_GDN_SBWD_WARPS=8 no faster.
//
// Rounding: bf16 operands, f32 accumulation; D scales dS^T K^T in f32 (the shared-memory pass
// scales K in bf16 instead).
#include "kernels/gated_delta/gated_delta_state_bwd.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda::gdn {
namespace {

constexpr int kWideMaxWarps = 16;

// q (single) and Q~ [R, K]; k, W [R, K], the block's dO columns [R, 16 warps] and gam
// double-buffered; P [R, R]; dec_j = D_{n-1,j} (zero past the chunk); a 16-row staging tile per
// warp.
template <class T>
struct StateBwdWideSmem {
  int64_t ld, ldo, ldp;  // q, Q~, k, W: ld; dO: ldo; P: ldp
  T *q, *qs, *P, *stage;
  T *k[2], *W[2], *dO[2];
  float *gam[2], *dec;
  __host__ __device__ StateBwdWideSmem(Carve& c, const Dims& d, int warps)
      : ld(tile::padded_ld<T>(d.K)),
        ldo(tile::padded_ld<T>(kRegCols * warps)),
        ldp(tile::padded_ld<T>(reg_rows(d))) {
    const int64_t R = reg_rows(d);
    q = c.take_as<T>(R * ld);
    qs = c.take_as<T>(R * ld);
    P = c.take_as<T>(R * ldp);
    for (int i = 0; i < 2; ++i) {
      k[i] = c.take_as<T>(R * ld);
      W[i] = c.take_as<T>(R * ld);
      dO[i] = c.take_as<T>(R * ldo);
      gam[i] = c.take_as<float>(R);
    }
    dec = c.take_as<float>(R);
    stage = c.take_as<T>(warps * 16 * kStageLd);
  }
};

// A 16 x 16 block of X from the A-fragment packing p of X^T's C fragments (WarpStage::put), through
// the warp's one-block staging tile, to rows r < rows of dst (row r at dst + r * stride, 16
// columns, 16-byte pieces: lane l stores row l / 2, half l % 2). The tile is free on return.
__device__ __forceinline__ void stage_store(bf16_t* slot, const uint32_t (&p)[4], bf16_t* dst,
                                            int64_t stride, int rows, int lane) {
  tile::store_a_trans(slot, kStageLd, 0, 0, lane, p);
  mma::sync_warp();
  const int r = lane / 2, h8 = 8 * (lane % 2);
  const uint4 x = *reinterpret_cast<const uint4*>(slot + r * kStageLd + h8);
  mma::sync_warp();
  if (r < rows) *reinterpret_cast<uint4*>(dst + r * stride + h8) = x;
}

// kMaxWarps bounds the block (16: 128 registers a thread; 8: 255, for AMOR_GDN_SBWD_WARPS <= 8).
template <int K, int kMaxWarps, class Sh>
__global__ void __launch_bounds__(kMaxWarps * 32, 1)
    gdn_state_bwd_wide_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                              const bf16_t* __restrict__ dO, const float* __restrict__ gam,
                              const bf16_t* __restrict__ W, const void* dsf, bool state_f32,
                              float scale, Dims d, bf16_t* __restrict__ dS_out,
                              bf16_t* __restrict__ dVn_out, float* __restrict__ ds0) {
  constexpr int KT = K / 8;                  // n8 tiles of dS^T
  constexpr int KS = K / 16;                 // k16 steps over K
  constexpr int LT = int(kGdnMaxChunk) / 8;  // n8 tiles of dVn^T (chunk rows)
  constexpr int kJp = K > 64 ? 1 : 2;        // n16 column blocks of dVn^T per part
  const int warps = int(blockDim.x) / 32;
  extern __shared__ float smem[];
  Sh::fix(d);
  Carve carve{smem};
  StateBwdWideSmem<bf16_t> s(carve, d, warps);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, V = d.V, KV = int64_t(K) * V;
  const int64_t cb = int64_t(blockIdx.x) * warps * kRegCols, c0 = cb + warp * kRegCols;
  const int wb = int(V - cb < warps * kRegCols ? V - cb : warps * kRegCols);  // block's columns
  const bool active = c0 < V;  // warp-uniform: a warp past V only helps with the shared work
  const int64_t ld = s.ld, ldo = s.ldo, ldp = s.ldp;
  const int R = int(reg_rows(d));
  bf16_t* const stage = s.stage + warp * 16 * kStageLd;
  auto rows_of = [&](int ch) { return int(d.T - int64_t(ch) * d.L < d.L ? d.T - int64_t(ch) * d.L : d.L); };
  auto load_q = [&](int ch) {  // chunk ch's q (single buffer)
    const int64_t x0 = (b * d.T + int64_t(ch) * d.L) * d.H + h;
    const int n = rows_of(ch);
    tile_load_zfill(q + x0 * K, d.H * K, n, (n + 15) / 16 * 16, K, s.q, ld);
  };
  auto load_rest = [&](int ch, int buf) {  // chunk ch's k, W, dO columns, gam
    const int64_t t0 = int64_t(ch) * d.L, x0 = (b * d.T + t0) * d.H + h, r0 = bh * d.T + t0;
    const int n = rows_of(ch), np = (n + 15) / 16 * 16;
    tile_load_zfill(k + x0 * K, d.H * K, n, np, K, pick(s.k, buf), ld);
    tile_load_zfill(W + r0 * K, K, n, np, K, pick(s.W, buf), ld);
    tile_load_zfill(dO + x0 * V + cb, d.H * V, n, np, wb, pick(s.dO, buf), ldo);
    vec_load_zfill(gam + r0, n, np, pick(s.gam, buf));
  };

  load_q(d.NC - 1);
  load_rest(d.NC - 1, 0);
  tile_commit();
  float ds[KT][4];  // dS^T: ds[j][e] = dS[8 j + 2 t + e % 2][c0 + g + 8 (e / 2)]
#pragma unroll
  for (int j = 0; j < KT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      ds[j][e] = dsf && active ? load_any(dsf, bh * KV + (8 * j + 2 * t + e % 2) * V + c0 + g +
                                                   8 * (e / 2),
                                          state_f32)
                               : 0.0f;
  for (int it = 0; it < int(d.NC); ++it) {
    const int ch = int(d.NC) - 1 - it;
    const int n = rows_of(ch), np = (n + 15) / 16 * 16, buf = it & 1;
    const bf16_t *kt = pick(s.k, buf), *Wt = pick(s.W, buf);
    const bf16_t* dOt = pick(s.dO, buf) + warp * kRegCols;
    const float* gm = pick(s.gam, buf);
    tile_wait();      // chunk ch's tiles (the only copies in flight)
    __syncthreads();  // ... visible to all; chunk ch + 1's k, W, dO, P, Q~, dec no longer read
    if (ch > 0) {
      load_rest(ch - 1, buf ^ 1);
      tile_commit();
    }
    const float glast = gm[n - 1];
    // The block's shared work: P_rj = scale (q_r . k_j) D_rj (j <= r < n, else 0),
    // Q~ = scale diag(e) Q (zero rows past n) and dec.
    // P by 16 x 16 blocks (rb, cb2) with cb2 <= rb (the blocks the warps read), a warp per block.
    {
      const int nb = np / 16;
      for (int job = warp; job < nb * (nb + 1) / 2; job += warps) {  // warp-uniform
        int rb = 0;
        while ((rb + 1) * (rb + 2) / 2 <= job) ++rb;
        const int cb2 = job - rb * (rb + 1) / 2;
        float acc[2][4];
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
          uint32_t a[4], b[4];
          tile::frag_a(a, s.q, ld, 16 * rb, 16 * kk, lane);
          tile::frag_b2(b, kt, ld, 16 * kk, 16 * cb2, lane);
          tile::mma_x2(acc[0], acc[1], a, b);
        }
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int hi = 0; hi < 2; ++hi) {
            const int r = 16 * rb + g + 8 * hi, c = 16 * cb2 + 8 * j + 2 * t;
            float x[2];
#pragma unroll
            for (int e = 0; e < 2; ++e)
              x[e] = c + e <= r && r < n ? scale * acc[j][2 * hi + e] * exp_t<bf16_t>(gm[r] - gm[c + e])
                                         : 0.0f;
            *reinterpret_cast<uint32_t*>(s.P + r * ldp + c) = mma::pack_bf16x2(x[0], x[1]);
          }
      }
    }
    for (int e = threadIdx.x; e < np * (K / 8); e += 32 * warps) {
      const int r = e / (K / 8), i = 8 * (e % (K / 8));
      const float se = r < n ? scale * exp_t<bf16_t>(gm[r]) : 0.0f;
      uint4 x = *reinterpret_cast<const uint4*>(s.q + r * ld + i);
      x.x = mma::scale_bf16x2(x.x, se, se);
      x.y = mma::scale_bf16x2(x.y, se, se);
      x.z = mma::scale_bf16x2(x.z, se, se);
      x.w = mma::scale_bf16x2(x.w, se, se);
      *reinterpret_cast<uint4*>(s.qs + r * ld + i) = x;
    }
    for (int r = threadIdx.x; r < R; r += 32 * warps)
      s.dec[r] = r < n ? exp_t<bf16_t>(glast - gm[r]) : 0.0f;
    __syncthreads();  // P, Q~, dec written; q no longer read
    if (ch > 0) {
      load_q(ch - 1);
      tile_commit();
    }
    if (!active) continue;
    // dVn^T in two halves of the chunk's rows (16 accumulators each instead of 32: with dS^T's 64
    // they are what bounds the registers): half hf holds the n16 column blocks jp = 2 hf, 2 hf + 1.
    //   dVn^T = dS^T K^T, k step by k step: dS^T's A fragment of step kk packed from its C
    //   fragments as consumed (the same bf16 values are dS' of this chunk: to the scratch through
    //   the stage, during the first half);
    //   ... the columns scaled by D_{n-1,j} (zero past n), then + dO^T P (P lower: k steps >= the
    //   column step only);
    //   dVn to the scratch (rows < n); -dVn^T as A fragments (the same bf16 values, sign flipped).
    bf16_t* const dso = dS_out + (bh * d.NC + ch) * KV + c0;
    bf16_t* const dvo = dVn_out + (bh * d.T + int64_t(ch) * d.L) * V + c0;
    uint32_t va[LT / 2][4];
#pragma unroll
    for (int hf = 0; hf < LT / 2 / kJp; ++hf) {
      float dv[2 * kJp][4];
#pragma unroll
      for (int j = 0; j < 2 * kJp; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dv[j][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t sa[4];
        tile::a_from_c(sa, ds, kk);
#pragma unroll
        for (int q2 = 0; q2 < kJp; ++q2) {
          const int jp = kJp * hf + q2;
          if (16 * jp < np) {
            uint32_t b[4];
            tile::frag_b2(b, kt, ld, 16 * kk, 16 * jp, lane);
            tile::mma_x2(dv[2 * q2], dv[2 * q2 + 1], sa, b);
          }
        }
        if (hf == 0) stage_store(stage, sa, dso + 16 * kk * V, V, 16, lane);
      }
#pragma unroll
      for (int q2 = 0; q2 < kJp; ++q2) {
        const int jp = kJp * hf + q2;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j0 = 16 * jp + 2 * t + e % 2;
          if (16 * jp < np) {
            dv[2 * q2][e] *= s.dec[j0];
            dv[2 * q2 + 1][e] *= s.dec[j0 + 8];
          }
        }
      }
#pragma unroll
      for (int kr = kJp * hf; kr < LT / 2; ++kr) {
        if (16 * kr >= n) break;
        uint32_t oa[4];
        tile::frag_a_trans(oa, dOt, ldo, 0, 16 * kr, lane);
#pragma unroll
        for (int q2 = 0; q2 < kJp; ++q2) {
          const int jp = kJp * hf + q2;
          if (jp <= kr) {
            uint32_t b[4];
            tile::frag_b2_trans(b, s.P, ldp, 16 * kr, 16 * jp, lane);
            tile::mma_x2(dv[2 * q2], dv[2 * q2 + 1], oa, b);
          }
        }
      }
#pragma unroll
      for (int q2 = 0; q2 < kJp; ++q2) {
        const int kr = kJp * hf + q2;
        uint32_t p[4];
        tile::a_from_c(p, dv, q2);
#pragma unroll
        for (int e = 0; e < 4; ++e) va[kr][e] = p[e] ^ 0x80008000u;
        if (16 * kr < n) stage_store(stage, p, dvo + 16 * kr * V, V, n - 16 * kr, lane);
      }
    }
    // dS^T <- e_{n-1} dS^T + dO^T Q~ - dVn^T W
    const float elast = exp_t<bf16_t>(glast);
#pragma unroll
    for (int j = 0; j < KT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) ds[j][e] *= elast;
#pragma unroll
    for (int kr = 0; kr < LT / 2; ++kr) {
      if (16 * kr >= n) break;
      uint32_t oa[4];
      tile::frag_a_trans(oa, dOt, ldo, 0, 16 * kr, lane);
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t b[4], w[4];
        tile::frag_b2_trans(b, s.qs, ld, 16 * kr, 16 * kk, lane);
        tile::frag_b2_trans(w, Wt, ld, 16 * kr, 16 * kk, lane);
        tile::mma_x2(ds[2 * kk], ds[2 * kk + 1], oa, b);
        tile::mma_x2(ds[2 * kk], ds[2 * kk + 1], va[kr], w);
      }
    }
  }
  if (ds0 && active) {
#pragma unroll
    for (int j = 0; j < KT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        ds0[bh * KV + (8 * j + 2 * t + e % 2) * V + c0 + g + 8 * (e / 2)] = ds[j][e];
  }
}

template <int K>
void launch_wide(const bf16_t* q, const bf16_t* k, const bf16_t* dO, const void* dsf, bool dsf_f32,
                 float scale, const Dims& d, const Scratch<bf16_t>& sc, float* ds0,
                 cudaStream_t stream) {
  const int warps = state_bwd_wide_warps(d), cols = warps * kRegCols;
  const dim3 grid(unsigned((d.V + cols - 1) / cols), unsigned(d.H), unsigned(d.B));
  const int64_t smem = smem_bytes<StateBwdWideSmem<bf16_t>>(d, warps);
  with_shape<bf16_t, K>(d, [&](auto sh) {
    // The 128-register build where blocks of more than 8 warps or two blocks per SM need it, else
    // (one block of <= 8 warps per SM, e.g. K 128 with AMOR_GDN_SBWD_WARPS=8) the one that may
    // use up to 255 and spills nothing.
    const bool small_regs = warps > 8 || 2 * (smem + 1024) <= 228 * 1024;
    auto* kernel = small_regs ? gdn_state_bwd_wide_kernel<K, kWideMaxWarps, decltype(sh)>
                              : gdn_state_bwd_wide_kernel<K, 8, decltype(sh)>;
    allow_smem(kernel);
    kernel<<<grid, 32 * warps, smem, stream>>>(q, k, dO, sc.gam, sc.W, dsf, dsf_f32, scale, d,
                                               sc.dS, sc.dVn, ds0);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

// As many warps as the head has 16-column slices (at most kWideMaxWarps), halved down to 4 while
// the grid would leave more than half of the SMs idle (few heads: smaller blocks spread over more
// SMs; below 4 warps each would compute a larger share of P and reload q, k, W for fewer columns),
// and further while the layout exceeds the shared memory.
int state_bwd_wide_warps(const Dims& d) {
  static const int fixed = env_int("AMOR_GDN_SBWD_WARPS", 1, kWideMaxWarps, 0);
  const int64_t slices = (d.V + kRegCols - 1) / kRegCols;
  int w = fixed ? fixed : int(slices < kWideMaxWarps ? slices : kWideMaxWarps);
  auto blocks = [&](int ww) { return d.B * d.H * ((slices + ww - 1) / ww); };
  if (!fixed)
    while (w > 4 && 2 * blocks(w) < num_sms()) w = (w + 1) / 2;
  while (w > 1 && smem_bytes<StateBwdWideSmem<bf16_t>>(d, w) > kGdnMaxSmemBytes) w = (w + 1) / 2;
  return w;
}

void launch_state_bwd_wide(const bf16_t* q, const bf16_t* k, const bf16_t* dO, const void* dsf,
                           bool dsf_f32, float scale, const Dims& d, const Scratch<bf16_t>& sc,
                           float* ds0, cudaStream_t stream) {
  switch (d.K) {
    case 32:
      return launch_wide<32>(q, k, dO, dsf, dsf_f32, scale, d, sc, ds0, stream);
    case 48:
      return launch_wide<48>(q, k, dO, dsf, dsf_f32, scale, d, sc, ds0, stream);
    case 64:
      return launch_wide<64>(q, k, dO, dsf, dsf_f32, scale, d, sc, ds0, stream);
    default:
      return launch_wide<128>(q, k, dO, dsf, dsf_f32, scale, d, sc, ds0, stream);
  }
}

}  // namespace amor::cuda::gdn
