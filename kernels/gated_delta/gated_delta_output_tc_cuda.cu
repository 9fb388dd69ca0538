// The gated delta rule's output from the chunk start states, all chunks in parallel, for bf16 at
// the presets' shapes (chunk 64, K 64 or 128, V a multiple of the V tile): the forward's third
// stage (gated_delta_fwd_cuda.cu's comment), as flash-linear-attention's chunk_fwd_o does it.
// Per chunk of n <= 64 rows with start state S [K,V], Vn = U - W S and cumulative log decay gam:
//   O = diag(scale e) Q S + P Vn,   e_r = exp(gam_r),   P_rj = scale (q_r . k_j) exp(gam_r - gam_j)
//   for j <= r (else 0).
// One block of 4 warps per (chunk, BV columns of V, head, batch); warp w owns the chunk's rows
// 16 w .. 16 w + 15 and keeps everything in registers:
//  1. its P rows: [16, 64] = Q_w K^T in MMA accumulators (only the key tiles j <= 16 w + 15: the
//     rest is masked out), then masked, decayed and scaled in place (f32) and rounded to bf16 as
//     A fragments of the next product (the C fragment of two n8 tiles is the A fragment of one
//     k16 step: no trip through shared memory);
//  2. O_w = (Q_w S) diag-scaled by scale e_r in f32, then + P_w Vn (k steps <= the diagonal);
//  3. O_w out through shared memory (the block's S tile, once every warp is done with it) as
//     16-byte row pieces.
// All four input tiles (q, k [64, K]; S [K, BV]; Vn [64, BV]) arrive by 16-byte cp.async in one
// group (rows past the chunk zero-filled). Rounding: P as gdn_output_kernel (scale q.k D in f32,
// one bf16 rounding); Q S is scaled in f32 after the product (the fused state pass's rounding)
// instead of from a rounded Q~ = bf16(scale e Q).
// Why a second output kernel: gdn_output_kernel (any dtype and shape) builds P in shared memory
// and goes through block_mm_t's generic tiles; on the H200 at B8 T2K H24 K64 V128 it and the
// fused state pass cost 2.8x fla's chunk_fwd_o + chunk_gated_delta_rule_fwd_h (tests/cuda/
// RESULTS.md, 2026-12-01 session 3).
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda::gdn {
namespace {

constexpr int kOutRows = 64;  // the chunk (L must be 64), 16 rows per warp
constexpr int kOutWarps = kOutRows / 16;

template <int K, int BV>
struct OutputTcSmem {
  static constexpr int ldk = K + 8, ldv = BV + 8;  // tile::padded_ld<bf16_t>
  bf16_t *q, *k, *S, *Vn;
  float* gam;
  __host__ __device__ OutputTcSmem(Carve& c, const Dims&)
      : q(c.take_as<bf16_t>(kOutRows * ldk)),
        k(c.take_as<bf16_t>(kOutRows * ldk)),
        S(c.take_as<bf16_t>(K * ldv)),
        Vn(c.take_as<bf16_t>(kOutRows * ldv)),
        gam(c.take_as<float>(kOutRows)) {}
};

template <int K, int BV>
__global__ void __launch_bounds__(32 * kOutWarps)
    gdn_output_tc_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                         const float* __restrict__ gam, const bf16_t* __restrict__ Vn,
                         const bf16_t* __restrict__ S_in, float scale, Dims d,
                         bf16_t* __restrict__ o) {
  static_assert(K % 16 == 0 && BV % 16 == 0 && K >= kOutRows, "S's tile holds the output rows");
  constexpr int KS = K / 16, VT = BV / 8;
  extern __shared__ float smem[];
  Carve carve{smem};
  OutputTcSmem<K, BV> s(carve, d);
  constexpr int ldk = OutputTcSmem<K, BV>::ldk, ldv = OutputTcSmem<K, BV>::ldv;
  const int nvt = int(d.V / BV);
  const int c = int(blockIdx.x) / nvt, v0 = (int(blockIdx.x) - c * nvt) * BV;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, V = d.V;
  const int64_t t0 = int64_t(c) * kOutRows;
  const int n = int(d.T - t0 < kOutRows ? d.T - t0 : kOutRows);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;

  const int64_t x0 = (b * d.T + t0) * d.H + h;
  tile_load_zfill(q + x0 * K, d.H * K, n, kOutRows, K, s.q, ldk);
  tile_load_zfill(k + x0 * K, d.H * K, n, kOutRows, K, s.k, ldk);
  tile_load_zfill(S_in + (bh * d.NC + c) * K * V + v0, V, K, K, BV, s.S, ldv);
  tile_load_zfill(Vn + (bh * d.T + t0) * V + v0, V, n, kOutRows, BV, s.Vn, ldv);
  vec_load_zfill(gam + bh * d.T + t0, n, kOutRows, s.gam);
  tile_commit();
  tile_wait();
  __syncthreads();

  const int m0 = 16 * warp;
  const bool live = m0 < n;  // warp-uniform; a warp past the chunk only joins the barriers
  float acc[VT][4];
  if (live) {
    // 1. P_w = Q_w K^T over the key tiles up to the diagonal block (jp <= warp).
    float p[kOutRows / 8][4];
#pragma unroll
    for (int j = 0; j < kOutRows / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) p[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[4];
      tile::frag_a(a, s.q, ldk, m0, 16 * kk, lane);
#pragma unroll
      for (int jp = 0; jp < kOutWarps; ++jp) {
        if (jp > warp) break;
        uint32_t b[4];
        tile::frag_b2(b, s.k, ldk, 16 * kk, 16 * jp, lane);
        tile::mma_x2(p[2 * jp], p[2 * jp + 1], a, b);
      }
    }
    // Mask, decay and scale in f32, then bf16 A fragments (k step jp: keys 16 jp .. 16 jp + 15).
    const int r0 = m0 + g, r1 = r0 + 8;
    const float g0 = s.gam[r0], g1 = s.gam[r1];
    uint32_t pa[kOutWarps][4];
#pragma unroll
    for (int jp = 0; jp < kOutWarps; ++jp) {
      if (jp > warp) break;
      float x[2][4];
#pragma unroll
      for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = 16 * jp + 8 * h2 + 2 * t + e % 2, r = e < 2 ? r0 : r1;
          const float gr = e < 2 ? g0 : g1;
          x[h2][e] = j <= r && r < n
                         ? scale * p[2 * jp + h2][e] * exp_t<bf16_t>(gr - s.gam[j])
                         : 0.0f;
        }
      tile::a_from_c(pa[jp], x, 0);
    }
    // 2. O_w = diag(scale e) Q_w S + P_w Vn.
#pragma unroll
    for (int j = 0; j < VT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[4];
      tile::frag_a(a, s.q, ldk, m0, 16 * kk, lane);
#pragma unroll
      for (int np = 0; np < VT / 2; ++np) {
        uint32_t b[4];
        tile::frag_b2_trans(b, s.S, ldv, 16 * kk, 16 * np, lane);
        tile::mma_x2(acc[2 * np], acc[2 * np + 1], a, b);
      }
    }
    const float e0 = scale * exp_t<bf16_t>(g0), e1 = scale * exp_t<bf16_t>(g1);
#pragma unroll
    for (int j = 0; j < VT; ++j) {
      acc[j][0] *= e0;
      acc[j][1] *= e0;
      acc[j][2] *= e1;
      acc[j][3] *= e1;
    }
#pragma unroll
    for (int jp = 0; jp < kOutWarps; ++jp) {
      if (jp > warp) break;
#pragma unroll
      for (int np = 0; np < VT / 2; ++np) {
        uint32_t b[4];
        tile::frag_b2_trans(b, s.Vn, ldv, 16 * jp, 16 * np, lane);
        tile::mma_x2(acc[2 * np], acc[2 * np + 1], pa[jp], b);
      }
    }
  }
  // 3. Through the S tile (every warp is done reading it after this barrier): rows m0.. of it
  // take the warp's O rows, then each lane stores 16-byte pieces of the rows < n.
  __syncthreads();
  if (!live) return;
  bf16_t* st = s.S + m0 * ldv;
#pragma unroll
  for (int j = 0; j < VT; ++j) {
    *reinterpret_cast<uint32_t*>(st + g * ldv + 8 * j + 2 * t) = mma::pack_bf16x2(acc[j][0], acc[j][1]);
    *reinterpret_cast<uint32_t*>(st + (g + 8) * ldv + 8 * j + 2 * t) =
        mma::pack_bf16x2(acc[j][2], acc[j][3]);
  }
  mma::sync_warp();
  constexpr int kPieces = BV / 8;  // 16-byte pieces per row
  const int64_t hv = d.H * V;
  bf16_t* const o_w = o + (x0 + m0 * d.H) * V + v0;
#pragma unroll
  for (int i = lane; i < 16 * kPieces; i += 32) {
    const int r = i / kPieces, cpos = (i - r * kPieces) * 8;
    if (m0 + r < n)
      *reinterpret_cast<uint4*>(o_w + r * hv + cpos) =
          *reinterpret_cast<const uint4*>(st + r * ldv + cpos);
  }
}

template <int K, int BV>
void launch(const bf16_t* q, const bf16_t* k, float scale, const Dims& d,
            const Scratch<bf16_t>& sc, bf16_t* o, cudaStream_t stream) {
  const int64_t smem = smem_bytes<OutputTcSmem<K, BV>>(d);
  auto* kernel = gdn_output_tc_kernel<K, BV>;
  allow_smem(kernel);
  const dim3 grid(unsigned(d.NC * (d.V / BV)), unsigned(d.H), unsigned(d.B));
  kernel<<<grid, 32 * kOutWarps, smem, stream>>>(q, k, sc.gam, sc.Vn, sc.S, scale, d, o);
  AMOR_CUDA_CHECK_LAUNCH();
}

// The V tile (AMOR_GDN_OUT_BV = 64 or 128, read once; default 128 where V allows): 128 reads
// q and k and computes P once per 128 columns, 64 gives twice the blocks.
int out_bv() {
  static const int bv = std::stoi(env_choice("AMOR_GDN_OUT_BV", {"64", "128"}, "128"));
  return bv;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool output_tc_ok(const Dims& d, const void* q, const void* k, const void* o) {
  return d.L == kOutRows && (d.K == 64 || d.K == 128) && d.V % 64 == 0 && aligned16(q) &&
         aligned16(k) && aligned16(o) && variant() == Variant::kSplit;
}

void launch_output_tc(const bf16_t* q, const bf16_t* k, float scale, const Dims& d,
                      const Scratch<bf16_t>& sc, bf16_t* o, cudaStream_t stream) {
  const bool wide = out_bv() == 128 && d.V % 128 == 0;
  if (d.K == 64) {
    if (wide) return launch<64, 128>(q, k, scale, d, sc, o, stream);
    return launch<64, 64>(q, k, scale, d, sc, o, stream);
  }
  if (wide) return launch<128, 128>(q, k, scale, d, sc, o, stream);
  launch<128, 64>(q, k, scale, d, sc, o, stream);
}

int64_t output_tc_smem_bytes(const Dims& d) {
  return d.K == 64 ? smem_bytes<OutputTcSmem<64, 128>>(d) : smem_bytes<OutputTcSmem<128, 128>>(d);
}

}  // namespace amor::cuda::gdn
