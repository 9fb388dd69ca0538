// The fused forward pass of the gated delta rule on Hopper's warpgroup MMA (wgmma, sm_90a):
// the second form's algorithm (gated_delta_fwd_fused2_cuda.cu has the math and why a warp owns
// columns of V), with every product one asynchronous 64 x 64 x 16 wgmma per k step instead of
// eight mma.sync and four ldmatrix per warp. K 64, V a multiple of 64, chunk 64:
// AMOR_GDN_FUSED=wg (opt-in until timed on the GPU).
//
// A block is one warpgroup (4 warps) owning 64 columns of V; warp w holds the state S^T's rows
// for its 16 columns (f32 accumulators, exactly the layout of wgmma's D: kernels/core/wgmma.cuh).
// Per chunk of n <= 64 rows (gam, beta, e = exp(gam), D_rj = exp(gam_r - gam_j)):
//   P^T-free:  P     = scale (Q K^T) o D, masked j <= r < n       mma_ss(q, k)      (state free)
//   chain:     Y^T   = S^T K^T                                    mma_rs(S^T, k)
//              X~^T  = (V^T - Y^T diag(e)) diag(beta)             registers
//              Vn^T  = X~^T Tm^T                                  mma_rs(X~^T, Tm)
//              S'^T  = e_{n-1} S^T + (Vn^T diag(D_{n-1,.})) K     mma_rs(., k transposed)
//   output:    O^T   = scale S^T Q^T diag(e) + Vn^T P^T           mma_rs(S^T, q), mma_rs(Vn^T, P)
// The k, q, Tm and P tiles are stored in wgmma's core-matrix layout (wgmma.cuh): the k tile is
// both K^T (k_major) and K (mn_major, the transposed B), so nothing is stored twice. The v tile
// is read by ldmatrix as in the second form (padded rows). Tm is zero above the diagonal and past
// the chunk (the prepare writes its zeros; rows past n are zero-filled), so Vn^T runs all four
// k steps without a triangle rule; P's epilogue writes its zeros too.
//
// Overlap: P and Y^T are issued together (one wait), the P epilogue (mask, decay, bf16 store)
// runs while Vn^T's products are in flight, and O^T's second half and the state update are
// issued back to back. Two barriers per chunk as the second form: A (chunk c's tiles landed;
// chunk c - 1's k, q, gam buffers free) and B (P complete; Tm, v, beta of chunk c read).
// Shared memory written by cp.async or stores is made visible to the tensor cores by
// wg::fence_smem() before each barrier.
//
// Rounding: as the second form (X~, Vn, P, the state operand bf16; accumulators f32); the sums
// inside a wgmma may be ordered differently from mma.sync's, within the bf16 tolerance. Keep mode
// (S_out, Vn_out) stores the same operands the products read, as the second form.
#include "kernels/core/wgmma.cuh"
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_fwd_fused.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda::gdn {
namespace {

constexpr int kRows = 64;  // the chunk
constexpr int kK = 64;     // K
constexpr int kBV = 64;    // columns of V per block (one warpgroup)
// Bytes between the k steps (16 columns or 16 rows) of a 64-column core-matrix tile: along the
// columns two core matrices (k_major), along the rows two bands of 8 rows (mn_major).
constexpr uint32_t kStepK = 2 * 128, kStepMN = 2 * 16 * 64;
// Bytes from a 64-column tile's start to its row 32 (four bands of 8 rows): the second half of an
// N = 32 product whose n runs along the tile's rows.
constexpr uint32_t kHalfN = 4 * 16 * 64;

struct WgSmem {
  static constexpr int ldv = kBV + 8;  // the v tile stays padded (ldmatrix reads)
  bf16_t *k[2], *q[2], *Tm, *P, *v;
  float *gam[2], *beta;
  __host__ __device__ WgSmem(Carve& c, const Dims&) {
    for (int i = 0; i < 2; ++i) k[i] = c.take_as<bf16_t>(kRows * kK);
    for (int i = 0; i < 2; ++i) q[i] = c.take_as<bf16_t>(kRows * kK);
    Tm = c.take_as<bf16_t>(kRows * kRows);
    P = c.take_as<bf16_t>(kRows * kRows);
    v = c.take_as<bf16_t>(kRows * ldv);
    for (int i = 0; i < 2; ++i) gam[i] = c.take_as<float>(kRows);
    beta = c.take_as<float>(kRows);
  }
};

// A 64 x 64 bf16 tile into the core-matrix layout: global row r < rows at src + r * gstride,
// rows past `rows` zero-filled; 16-byte cp.async pieces (8 columns of a row), a row's 8 pieces
// on consecutive threads (128 contiguous bytes read). Not collective.
__device__ __forceinline__ void core_load_zfill(const bf16_t* src, int64_t gstride, int rows,
                                                bf16_t* dst) {
  for (int idx = int(threadIdx.x); idx < kRows * 8; idx += int(blockDim.x)) {
    const int r = idx >> 3, c = 8 * (idx & 7);
    mma::cp_async_16(dst + wg::core_offset(r, c, kK), src + (r < rows ? r : 0) * gstride + c,
                     r < rows);
  }
}

__global__ void __launch_bounds__(128, 3)
    gdn_fwd_wgmma_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                         const bf16_t* __restrict__ v, const void* beta_in, bool gate_f32,
                         const float* __restrict__ gam, const bf16_t* __restrict__ Tm,
                         const void* s0, bool state_f32, float scale, Dims d,
                         float* __restrict__ s_final, bf16_t* __restrict__ o,
                         bf16_t* __restrict__ S_out, bf16_t* __restrict__ Vn_out) {
  constexpr int ldv = WgSmem::ldv;
  extern __shared__ float smem[];
  Carve carve{smem};
  WgSmem s(carve, d);
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int T = int(d.T), H = int(d.H), V = int(d.V), NC = int(d.NC);
  const int bh = int(blockIdx.z) * H + int(blockIdx.y), v0 = int(blockIdx.x) * kBV;
  const int cw = 16 * warp;                                      // the warp's columns
  const int64_t xb = int64_t(blockIdx.z) * T * H + blockIdx.y;  // token row of (b, t 0, h)
  const int64_t KV = int64_t(kK) * V;
  const bool with_o = o != nullptr;  // without: the backward's recomputation of S and Vn
  auto rows_of = [&](int c) { return T - c * kRows < kRows ? T - c * kRows : kRows; };
  auto load_kq = [&](int c, int buf) {
    const int64_t x0 = xb + int64_t(c) * kRows * H;
    const int n = rows_of(c);
    core_load_zfill(k + x0 * kK, int64_t(H) * kK, n, pick(s.k, buf));
    if (with_o) core_load_zfill(q + x0 * kK, int64_t(H) * kK, n, pick(s.q, buf));
    vec_load_zfill(gam + int64_t(bh) * T + c * kRows, n, kRows, pick(s.gam, buf));
  };
  auto load_tmv = [&](int c) {
    const int64_t x0 = xb + int64_t(c) * kRows * H;
    const int n = rows_of(c);
    core_load_zfill(Tm + (int64_t(bh) * T + c * kRows) * kRows, kRows, n, s.Tm);
    tile_load_zfill(v + x0 * V + v0, int64_t(H) * V, n, kRows, kBV, s.v, ldv);
  };
  auto beta_of = [&](int c) {
    const int n = rows_of(c);
    return tid < n ? load_any(beta_in, xb + int64_t(c * kRows + tid) * H, gate_f32) : 0.0f;
  };

  // S^T [the warp's 16 columns, K] as wgmma's D: st[j][e] = S[8 j + 2 t + e % 2][cw + g + 8 (e / 2)].
  float st[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
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
    const float* gm = pick(s.gam, buf);
    const wg::Operand kb_op = wg::k_major(kt, kK), qa = wg::k_major(qt, kK);
    tile_wait<0>();
    wg::fence_smem();
    __syncthreads();  // A: chunk c's tiles and beta visible; chunk c - 1's k, q, gam free
    if (c + 1 < NC) load_kq(c + 1, buf ^ 1);
    tile_commit();
    const float bnext = c + 1 < NC && tid < kRows ? beta_of(c + 1) : 0.0f;  // stored after B

    // P = scale (Q K^T) o D masked (j <= r < n), bf16 into the P tile (this warp's rows 16 w ..,
    // columns in two halves of 32: m64n32 products, 16 accumulators live): state independent,
    // so first and alone (its accumulators free before the chain's).
    if (with_o) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float p[4][4];
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          wg::mma_ss(p, qa, kStepK * kk, kb_op, kStepK * kk + kHalfN * h, kk > 0);
        wg::commit();
        wg::wait<0>();
        wg::fence_operand(p);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int r = 16 * warp + g + 8 * hh, jc = 32 * h + 8 * j + 2 * t;
            const float gr = gm[r];
            const float y0 =
                jc <= r && r < n ? scale * p[j][2 * hh] * exp_t<bf16_t>(gr - gm[jc]) : 0.0f;
            const float y1 = jc + 1 <= r && r < n
                                 ? scale * p[j][2 * hh + 1] * exp_t<bf16_t>(gr - gm[jc + 1])
                                 : 0.0f;
            *reinterpret_cast<uint32_t*>(s.P + wg::core_offset(r, jc, kRows)) =
                mma::pack_bf16x2(y0, y1);
          }
      }
    }

    // Y^T = S^T K^T, the state's A fragments packed per k step (keep mode: the chunk's start
    // state stored from them).
    float y[8][4];
    {
      uint32_t sa[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        pack_s(st, kk, sa[kk]);
        if (S_out) {
          store_a_rows(sa[kk], g, t, 16 * kk, S_out + (int64_t(bh) * NC + c) * KV + v0 + cw, V,
                       kK);
        }
      }
      wg::fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wg::mma_rs<false>(y, sa[kk], kb_op, kStepK * kk, kk > 0);
      wg::commit();
      wg::wait<0>();
      wg::fence_operand(y);
    }

    // X~^T = (V^T - Y^T diag(e)) diag(beta) as the A fragments xa[kb] (the chunk's rows 16 kb ..)
    // of Vn^T = X~^T Tm^T.
    uint32_t vn[4][4];
    {
      uint32_t xa[4][4];
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) {
        uint32_t vf[4];  // v^T as C fragments (columns g: vf[0], vf[1]; g + 8: vf[2], vf[3])
        tile::frag_b2_trans(vf, s.v, ldv, 16 * kb, cw, lane);
        float x[2][4];
        x_tilde(y[2 * kb], y[2 * kb + 1], vf, s.beta, gm, kb, t, x);
        tile::a_from_c(xa[kb], x, 0);
      }
      float vacc[8][4];
      wg::fence();
#pragma unroll
      for (int kb = 0; kb < 4; ++kb)
        wg::mma_rs<false>(vacc, xa[kb], wg::k_major(s.Tm, kRows), kStepK * kb, kb > 0);
      wg::commit();
      wg::wait<0>();
      wg::fence_operand(vacc);
#pragma unroll
      for (int rb = 0; rb < 4; ++rb) tile::a_from_c(vn[rb], vacc, rb);
    }

    wg::fence_smem();
    __syncthreads();  // B: P complete; Tm, v and beta of chunk c no longer read
    if (c + 1 < NC) load_tmv(c + 1);
    tile_commit();
    if (tid < kRows) s.beta[tid] = bnext;

    if (Vn_out) {
      bf16_t* const vo = Vn_out + (int64_t(bh) * T + c * kRows) * V + v0 + cw;
#pragma unroll
      for (int rb = 0; rb < 4; ++rb) store_a_rows(vn[rb], g, t, 16 * rb, vo, V, n);
    }

    // O^T = scale S^T Q^T diag(e) (B: the q tile as Q^T; the state repacked) + Vn^T P^T (B: the
    // P tile as P^T; k steps past the half's rows are zero and skipped), in two halves of 32 of
    // the chunk's rows (m64n32: 16 accumulators live), stored transposed (rows < n).
    if (with_o) {
      uint32_t sa[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) pack_s(st, kk, sa[kk]);
      bf16_t* const oc = o + (xb + int64_t(c) * kRows * H) * V + v0 + cw;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float ot[4][4];
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          wg::mma_rs<false>(ot, sa[kk], qa, kStepK * kk + kHalfN * h, kk > 0);
        wg::commit();
        wg::wait<0>();
        wg::fence_operand(ot);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int r = 32 * h + 8 * j + 2 * t;
          const float se0 = scale * exp_t<bf16_t>(gm[r]), se1 = scale * exp_t<bf16_t>(gm[r + 1]);
          ot[j][0] *= se0;
          ot[j][1] *= se1;
          ot[j][2] *= se0;
          ot[j][3] *= se1;
        }
        wg::fence();
#pragma unroll
        for (int kb = 0; kb < 2 * h + 2; ++kb)
          wg::mma_rs<false>(ot, vn[kb], wg::k_major(s.P, kRows), kStepK * kb + kHalfN * h, true);
        wg::commit();
        wg::wait<0>();
        wg::fence_operand(ot);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int r = 32 * h + 8 * j + 2 * t;
          store_t(mma::pack_bf16x2(ot[j][0], ot[j][1]), g, r, g, oc, int64_t(H) * V, n);
          store_t(mma::pack_bf16x2(ot[j][2], ot[j][3]), g, r, g + 8, oc, int64_t(H) * V, n);
        }
      }
    }

    // S'^T = e_{n-1} S^T + (Vn^T D) K, D_j = exp(gam_{n-1} - gam_j) (j < n, else 0) scaling the
    // columns of Vn^T (A), the k tile transposed (B).
    {
      const float glast = gm[n - 1], elast = exp_t<bf16_t>(glast);
      uint32_t as[4][4];
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) {
        float dd[4];  // D_j for the fragment's columns j = 16 kb + 2 t + {0, 1, 8, 9}
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int j = 16 * kb + 2 * t + (u & 1) + 8 * (u >> 1);
          dd[u] = j < n ? exp_t<bf16_t>(glast - gm[j]) : 0.0f;
        }
        as[kb][0] = mma::scale_bf16x2(vn[kb][0], dd[0], dd[1]);
        as[kb][1] = mma::scale_bf16x2(vn[kb][1], dd[0], dd[1]);
        as[kb][2] = mma::scale_bf16x2(vn[kb][2], dd[2], dd[3]);
        as[kb][3] = mma::scale_bf16x2(vn[kb][3], dd[2], dd[3]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[j][e] *= elast;
      wg::fence();
#pragma unroll
      for (int kb = 0; kb < 4; ++kb)
        wg::mma_rs<true>(st, as[kb], wg::mn_major(kt, kK), kStepMN * kb, true);
      wg::commit();
      wg::wait<0>();
      wg::fence_operand(st);
    }
  }
  if (s_final) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s_final[state_at(bh, KV, V, v0, cw, j, e, g, t)] = st[j][e];
  }
}

}  // namespace

bool fwd_wgmma_ok(const Dims& d) {
  return fused_form() == "wg" && d.L == kRows && d.K == kK && d.V % kBV == 0;
}

void launch_fwd_wgmma(const bf16_t* q, const bf16_t* k, const bf16_t* v, const void* beta,
                      bool gate_f32, const void* s0, bool state_f32, float scale, const Dims& d,
                      const float* gam, const bf16_t* Tm, float* s_final, bf16_t* o,
                      bf16_t* S_out, bf16_t* Vn_out, cudaStream_t stream) {
  const int64_t smem = smem_bytes<WgSmem>(d);
  allow_smem(gdn_fwd_wgmma_kernel);
  const dim3 grid(unsigned(d.V / kBV), unsigned(d.H), unsigned(d.B));
  gdn_fwd_wgmma_kernel<<<grid, 128, smem, stream>>>(q, k, v, beta, gate_f32, gam, Tm, s0,
                                                    state_f32, scale, d, s_final, o, S_out,
                                                    Vn_out);
  AMOR_CUDA_CHECK_LAUNCH();
}

int64_t fwd_wgmma_smem_bytes(const Dims& d) {
  return d.L == kRows && d.K == kK ? smem_bytes<WgSmem>(d) : 0;
}

}  // namespace amor::cuda::gdn
