// Gated delta rule backward on the GPU: the chunked backward of gated_delta_chunked_ref.h (its
// comment lists every term), cut into kernels the way flash-linear-attention structures
// chunk_gated_delta_rule_bwd. With the forward's notation (gated_delta_fwd_cuda.cu):
//  0. recompute: gdn_prepare_kernel (gam, W, U and now Tm) and gdn_state_fwd_kernel (every
//     chunk's start state S and Vn = U - W S), exactly the forward's kernels; skipped when the
//     forward kept them (`saved`, gated_delta_cuda.h), which gives the same bits.
//  1. gdn_state_bwd_kernel, one block per (32 columns of V, head, batch), chunks in reverse:
//     carries dS (the gradient of the chunk's end state, d_final_state for the last chunk; f32 in
//     shared memory), stores it per chunk ([BH,NC,K,V]), and computes
//        dVn_j = sum_{r>=j} P_rj dO_r + D_{n-1,j} dS^T k_j        -> scratch [BH,T,V]
//        dS   <- e_{n-1} dS + scale sum_r e_r q_r dO_r^T - sum_r W_r dVn_r^T
//     Columns of dS are independent as in the forward's state pass; dS after chunk 0 is
//     d_initial_state. Chunk c - 1's q, k, dO, W are copied in (cp.async) while chunk c is
//     computed: a chunk step is three products and three barriers, no memory latency. For bf16
//     (the shapes of the register-state forward pass) gdn_state_bwd_wide_kernel
//     (gated_delta_state_bwd_cuda.cu) replaces it: a warp per 16 columns of V with its dS slice
//     in registers, in blocks of all of a head's warps (AMOR_GDN_VARIANT=tile keeps this one;
//     AMOR_GDN_SBWD_WARPS=N fixes the wide blocks' warps).
//  2. gdn_bwd_qk_kernel, one block per (chunk, head, batch), chunks in parallel: the terms of
//     O = scale diag(e) Q S + P Vn and S' = e S + Kh^T Vn and Vn = U - W S, reduced over V in
//     32-column tiles: dP = dO Vn^T, dqS = dO S^T, dKh = Vn dS'^T, dW = -dVn S^T, <dS', S>. Gives
//     dq (final), dk and dgam partials (f32 scratch) and dW. For bf16 with K <= 128 (the register
//     passes' shapes) gdn_bwd_qk_reg_kernel replaces it by default: the four sums in MMA
//     accumulators over all of V (64-column tiles, double-buffered) instead of added into shared
//     memory tile by tile (AMOR_GDN_QK=tile keeps this one; AMOR_GDN_VARIANT=tile implies it).
//     Its finish computes dq, dk and dW on the warps' own accumulators, with only dP through
//     shared memory. At K 128 (compiled shape K 128, V 256) AMOR_GDN_QK_FORM=stream (default) runs
//     gdn_bwd_qk_stream_kernel instead: the same products and finish in one persistent block per
//     SM that copies the next chunk's tiles while it finishes the current one.
//  3. gdn_bwd_wy_kernel, one block per (chunk, head, batch): the WY/UT terms. dTm = (dVn V^T +
//     dW K^T diag(e)) diag(beta) (lower), dv = diag(beta) Tm^T dVn, z = Tm^T dW, dA = -Tm^T dTm
//     Tm^T (strictly lower), then dk, dbeta, dgam from W, U and A, and dg as the reverse
//     cumulative sum of dgam inside the chunk. Its V tiles are double-buffered (the next tile's
//     copies in flight while one is multiplied). For bf16 with the register passes' K (and V,
//     chunk multiples of 16) gdn_bwd_wy_reg_kernel replaces it by default: a warp per 16 rows of
//     the chunk with every product in MMA fragments, chained without shared memory except for
//     the two [L, L] tiles the warps exchange (N = dTm Tm^T and E), five barriers plus the V
//     tiles' (AMOR_GDN_WY=tile keeps this one; AMOR_GDN_VARIANT=tile implies it).
// Tiles as in the forward: 16-byte cp.async copies, bf16 inputs and bf16 scratch kept bf16 in
// shared memory, f32 accumulators. The products go through block_mm_t<T> (gated_delta_tc.cuh:
// tensor cores with ldmatrix fragments, bf16 operands and f32 accumulation for bf16 inputs; exact
// SIMT f32 for f32 inputs); pass 1's two products are each one product over a concatenated k
// ([P^T | K~] [dO; dS] and [Q~ | -W]^T [dO; dVn], K~ = diag(dec) K and Q~ = scale diag(e) Q
// scaled once in shared memory). The only sequential work is pass 1 (and the recomputed forward
// state pass): NC steps per head.
// Memory traffic beyond the forward's: the scratch Tm [BH,T,L], dS per chunk (K*V), dVn, dW (all
// only multiplied later: stored in the input dtype) and the f32 dk and dgam partials; each written
// once and read once or twice.
// Occupancy (bf16, K 64, V 128, L 64): state_bwd, bwd_qk (either kernel), bwd_wy two blocks per SM
// each (97, 112 or 111, and 91 KB of shared memory, <= 128 registers); bwd_wy_reg three blocks
// of 4 warps (65 KB, <= 168 registers), two at K 128, V 256 (97 KB); bwd_qk_stream one 16-warp
// block (197 KB, 128 registers).
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_state_bwd.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda {
namespace gdn {
namespace {

// The sequential pass of the backward. Chunk c - 1's q, k, dO, W and gam are loaded (cp.async,
// double-buffered) while chunk c is computed, so no memory latency sits on the chain from chunk to
// chunk. Two blocks per SM (97 KB of shared memory for bf16).
template <class T>
__global__ void __launch_bounds__(kThreads, 2)
    gdn_state_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ dO,
                         const float* __restrict__ gam, const T* __restrict__ W, const void* dsf,
                         bool state_f32, float scale, Dims d, T* __restrict__ dS_out,
                         T* __restrict__ dVn_out, float* __restrict__ ds0) {
  extern __shared__ float smem[];
  Carve carve{smem};
  StateBwdSmem<T> s(carve, d);
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, K = d.K, V = d.V;
  const int64_t c0 = int64_t(blockIdx.x) * kVt, KV = K * V;
  const int64_t ldk = s.ldk, ldo = s.ldo, ldp = s.ldp;
  const int w = int(V - c0 < kVt ? V - c0 : kVt);
  auto rows_of = [&](int64_t ch) { return int(d.T - ch * d.L < d.L ? d.T - ch * d.L : d.L); };
  auto load_chunk = [&](int64_t ch, int buf) {  // chunk ch's q, k, dO, W, gam into buffer buf
    const int64_t t0 = ch * d.L, row0 = bh * d.T + t0;
    const int n = rows_of(ch);
    tile_load_rows(q, d, b, h, t0, n, K, 0, int(K), pick(s.q, buf), ldk);
    tile_load_rows(k, d, b, h, t0, n, K, 0, int(K), pick(s.k, buf), ldk);
    tile_load_rows(dO, d, b, h, t0, n, V, c0, w, pick(s.dO, buf), ldo);
    tile_load_scratch(W, row0, n, K, 0, int(K), pick(s.W, buf), ldk);
    tile_load(gam + row0, n, 1, n, pick(s.gam, buf), n);
  };

  load_chunk(d.NC - 1, 0);
  tile_commit();
  for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
    const int i = idx / w, c = idx % w;
    s.dS[i * kVs + c] = dsf ? load_any(dsf, bh * KV + i * V + c0 + c, state_f32) : 0.0f;
  }
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int nwarps = int(blockDim.x) / 32;
  for (int64_t it = 0; it < d.NC; ++it) {
    const int64_t ch = d.NC - 1 - it, row0 = bh * d.T + ch * d.L;
    const int n = rows_of(ch), buf = int(it & 1);
    T *qt = pick(s.q, buf), *Wt = pick(s.W, buf);
    const T *kt = pick(s.k, buf), *dOt = pick(s.dO, buf);
    const float* gm = pick(s.gam, buf);
    tile_wait();      // chunk ch's tiles (the only copies in flight)
    __syncthreads();  // ... visible to all; dS complete; chunk ch + 1's tiles no longer read
    if (ch > 0) {
      load_chunk(ch - 1, buf ^ 1);
      tile_commit();
    }
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      dS_out[(bh * d.NC + ch) * KV + i * V + c0 + c] = from_f32<T>(s.dS[i * kVs + c]);
    }
    const float glast = gm[n - 1], elast = exp_t<T>(glast);
    // The operands' scalings, one pass each (a warp per row) instead of a multiply per fragment
    // element, placed where the tiles are free: K~ = diag(dec) K (a new tile: k is read by P
    // below) and -W (in place) now, Q~ = scale diag(e) Q (in place) once P no longer reads q.
    for (int r = warp; r < n; r += nwarps) {
      const float dec = exp_t<T>(glast - gm[r]);
      for (int i = lane; i < K; i += 32) {
        s.kd[r * ldk + i] = from_f32<T>(dec * to_f32(kt[r * ldk + i]));
        Wt[r * ldk + i] = from_f32<T>(-to_f32(Wt[r * ldk + i]));
      }
    }
    block_mm_t<T>(n, n, int(K), RowA<T>{qt, ldk}, ColB<T>{kt, ldk}, [&](int r, int j, float qk) {
      s.P[r * ldp + j] = from_f32<T>(j <= r ? scale * qk * exp_t<T>(gm[r] - gm[j]) : 0.0f);
    });
    __syncthreads();
    // dVn_j = sum_{r>=j} P_rj dO_r + D_{n-1,j} dS^T k_j
    // One product over the concatenated k = (the rows r, then K): [P^T | K~] [dO; dS]
    // (P is zero above the diagonal, so the r < j terms vanish).
    block_mm_t<T>(n, w, n + int(K), CatA{ColA<T>{s.P, ldp}, RowA<T>{s.kd, ldk}, n},
                  CatB{RowB<T>{dOt, ldo}, RowB<float>{s.dS, kVs}, n},
                  Epi{[&](int j, int c, float dvn) {
                        s.dVn[j * ldo + c] = from_f32<T>(dvn);
                        dVn_out[(row0 + j) * V + c0 + c] = from_f32<T>(dvn);
                      },
                      [&](int j, int c, float x0, float x1) {
                        s.dVn[j * ldo + c] = from_f32<T>(x0);
                        s.dVn[j * ldo + c + 1] = from_f32<T>(x1);
                        store2(dVn_out, (row0 + j) * V + c0 + c, x0, x1);
                      }});
    for (int r = warp; r < n; r += nwarps) {
      const float se = scale * exp_t<T>(gm[r]);
      for (int i = lane; i < K; i += 32)
        qt[r * ldk + i] = from_f32<T>(se * to_f32(qt[r * ldk + i]));
    }
    __syncthreads();
    // dS <- e_{n-1} dS + scale sum_r e_r q_r dO_r^T - sum_r W_r dVn_r^T, as one product
    // [Q~ | -W]^T [dO; dVn] over k = (the rows, twice); each dS element is read and written by the
    // thread that owns it.
    block_mm_t<T>(
        int(K), w, 2 * n, CatA{ColA<T>{qt, ldk}, ColA<T>{Wt, ldk}, n},
        CatB{RowB<T>{dOt, ldo}, RowB<T>{s.dVn, ldo}, n},
        Epi{[&](int i, int c, float x) { s.dS[i * kVs + c] = elast * s.dS[i * kVs + c] + x; },
            [&](int i, int c, float x0, float x1) { axpy2(s.dS, i * kVs + c, elast, x0, x1); }});
  }
  __syncthreads();
  if (ds0) {
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      ds0[bh * KV + i * V + c0 + c] = s.dS[i * kVs + c];
    }
  }
}

// gdn_bwd_qk_reg_kernel's finish: acc (the n8 tiles of rows m0 .. m0 + 16, columns h0 .. h0 + 32
// of a warp's C fragments; tiles at columns >= K stay zero) = sum over the k16 blocks
// k0 = k_begin, k_begin + 16, .. < k_end of A[m0.., k0..] B[k0.., h0..], with A the f32 dP tile
// read as RowA (dP: dq's product) or ColA (dP^T: dk's), its pairs rounded to bf16, and B the bf16
// rows of b (q or k).
template <class A>
__device__ __forceinline__ void finish_product(float (&acc)[4][4], const A& a, const bf16_t* b,
                                               int64_t ldb, int k_begin, int k_end, int m0,
                                               int h0, int K, int lane) {
  const int r0 = m0 + lane / 4, r1 = r0 + 8, t = lane % 4;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
  for (int k0 = k_begin; k0 < k_end; k0 += 16) {
    const uint32_t f[4] = {a.pair(r0, k0 + 2 * t), a.pair(r1, k0 + 2 * t),
                           a.pair(r0, k0 + 2 * t + 8), a.pair(r1, k0 + 2 * t + 8)};
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
      if (h0 + 16 * jp < K) {
        uint32_t bf[4];
        tile::frag_b2_trans(bf, b, ldb, k0, h0 + 16 * jp, lane);
        tile::mma_x2(acc[2 * jp], acc[2 * jp + 1], f, bf);
      }
    }
  }
}

// The bf16 pair p[0], p[1] (4-byte aligned) as two floats, one 4-byte load.
__device__ __forceinline__ float2 load_bf16x2(const bf16_t* p) {
  const uint32_t u = load_pair(p), lo = u << 16, hi = u & 0xffff0000u;
  float2 f;
  memcpy(&f.x, &lo, 4);
  memcpy(&f.y, &hi, 4);
  return f;
}

// The two steps both bwd_qk kernels finish with, on their shared-memory f32 [R, R] tiles dP and P
// (row stride ldl) and the chunk's gam. bwd_qk_p: P_rj = scale (q_r.k_j) D_rj; keeps dP_rj P_rj
// in P and dP_rj D_rj in dP (j <= r, else 0). Block-wide; the caller synchronises after.
template <class T>
__device__ __forceinline__ void bwd_qk_p(const T* q, const T* k, int64_t ldk, const float* gam,
                                         float* dP, float* P, int64_t ldl, int n, int K,
                                         float scale) {
  block_mm_t<T>(n, n, K, RowA<T>{q, ldk}, ColB<T>{k, ldk}, [&](int r, int j, float qk) {
    const float D = j <= r ? exp_t<T>(gam[r] - gam[j]) : 0.0f, dp = dP[r * ldl + j];
    P[r * ldl + j] = dp * scale * qk * D;
    dP[r * ldl + j] = dp * D;
  });
}
// bwd_qk_dgam: dgam_r (partial, to out[r]) = rp_r - sum_r' dP_r'r P_r'r - x_r (+ e_{n-1}
// <dS', S> + sum_j x_j for the last row), with rp_r = scale e_r q_r.(S dO_r) + sum_j dP_rj P_rj
// and x_j = D_{n-1,j} k_j . dKh_j computed by the caller; the column sum by a thread per column
// (consecutive threads, consecutive banks).
template <class T>
__device__ __forceinline__ void bwd_qk_dgam(const float* rp, const float* x, const float* P,
                                            int64_t ldl, int n, float glast, float sd,
                                            float* __restrict__ out) {
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float a = rp[r] - x[r];
    for (int j = 0; j < n; ++j) a -= P[j * ldl + r];
    if (r == n - 1) {
      a += exp_t<T>(glast) * sd;
      for (int j = 0; j < n; ++j) a += x[j];
    }
    out[r] = a;
  }
}

// The rest of bwd_qk once the V reductions dP = dO Vn^T, dqS = dO S^T, dKh = Vn dS'^T,
// dW = -dVn S^T (f32 in shared memory) and <dS', S> (sd) are done: P, dq, dk and dgam partials, dW
// (gdn_bwd_qk_kernel's; gdn_bwd_qk_reg_kernel finishes on its accumulators).
template <class T>
__device__ __forceinline__ void bwd_qk_finish(const BwdQkSmem<T>& s, const ChunkPos& p,
                                              const Dims& d, float scale, float sd,
                                              T* __restrict__ dq, float* __restrict__ dk_part,
                                              float* __restrict__ dgam_part,
                                              T* __restrict__ dW_out) {
  const int n = p.n;
  const int64_t K = d.K, row0 = p.bh * d.T + p.t0;
  const int64_t ldk = s.ldk, ldl = s.ldl, ldw = s.ldw;
  bwd_qk_p(s.q, s.k, ldk, s.gam, s.dP, s.P, ldl, n, int(K), scale);
  __syncthreads();
  const float glast = s.gam[n - 1];
  // dq_r = scale (e_r S dO_r + sum_{j<=r} dP_rj D_rj k_j)
  block_mm_t<T, Tri::kLower>(n, int(K), n, RowA<float>{s.dP, ldl}, RowB<T>{s.k, ldk},
                             Epi{[&](int r, int i, float x) {
                                   dq[((p.b * d.T + p.t0 + r) * d.H + p.h) * K + i] = from_f32<T>(
                                       scale * (exp_t<T>(s.gam[r]) * s.dqS[r * ldw + i] + x));
                                 },
                                 [&](int r, int i, float x0, float x1) {
                                   const float e = exp_t<T>(s.gam[r]);
                                   store2(dq, ((p.b * d.T + p.t0 + r) * d.H + p.h) * K + i,
                                          scale * (e * s.dqS[r * ldw + i] + x0),
                                          scale * (e * s.dqS[r * ldw + i + 1] + x1));
                                 }});
  // dk_j (partial) = scale sum_{r>=j} dP_rj D_rj q_r + D_{n-1,j} dKh_j; dW to the scratch.
  block_mm_t<T, Tri::kUpper>(
      n, int(K), n, ColA<float>{s.dP, ldl}, RowB<T>{s.q, ldk},
      Epi{[&](int j, int i, float x) {
            dk_part[(row0 + j) * K + i] = scale * x + exp_t<T>(glast - s.gam[j]) * s.dKh[j * ldw + i];
            dW_out[(row0 + j) * K + i] = from_f32<T>(s.dW[j * ldw + i]);
          },
          [&](int j, int i, float x0, float x1) {
            const float D = exp_t<T>(glast - s.gam[j]);
            const float* kh = s.dKh + j * ldw + i;
            store2(dk_part, (row0 + j) * K + i, scale * x0 + D * kh[0], scale * x1 + D * kh[1]);
            store2(dW_out, (row0 + j) * K + i, s.dW[j * ldw + i], s.dW[j * ldw + i + 1]);
          }});
  // The row reductions, one warp per row with the lanes along the row (a thread per row would read
  // a column of these [*, 64] tiles, one bank 32 times): x_j = D_{n-1,j} k_j . dKh_j and
  // rp_r = scale e_r q_r.(S dO_r) + sum_j dP_rj P_rj.
  {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int r = int(threadIdx.x) / 32; r < n; r += nw) {  // warp-uniform (warp_sum)
      float kd = 0.0f, qd = 0.0f, ps = 0.0f;
      for (int i = lane; i < K; i += 32) {
        kd += to_f32(s.k[r * ldk + i]) * s.dKh[r * ldw + i];
        qd += to_f32(s.q[r * ldk + i]) * s.dqS[r * ldw + i];
      }
      for (int j = lane; j < n; j += 32) ps += s.P[r * ldl + j];
      kd = warp_sum(kd);
      qd = warp_sum(qd);
      ps = warp_sum(ps);
      if (lane == 0) {
        s.x[r] = exp_t<T>(glast - s.gam[r]) * kd;
        s.rp[r] = scale * exp_t<T>(s.gam[r]) * qd + ps;
      }
    }
  }
  __syncthreads();
  bwd_qk_dgam<T>(s.rp, s.x, s.P, ldl, n, glast, sd, dgam_part + row0);
}

// Two blocks per SM (112 KB of shared memory for bf16; P over the V tiles).
template <class T>
__global__ void __launch_bounds__(kThreads, 2)
    gdn_bwd_qk_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ dO,
                      const float* __restrict__ gam, const T* __restrict__ Vn,
                      const T* __restrict__ dVn, const T* __restrict__ S_in,
                      const T* __restrict__ dS_in, float scale, Dims d, T* __restrict__ dq,
                      float* __restrict__ dk_part, float* __restrict__ dgam_part,
                      T* __restrict__ dW_out) {
  extern __shared__ float smem[];
  Carve carve{smem};
  BwdQkSmem<T> s(carve, d);
  const ChunkPos p = chunk_pos(d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0;
  const int64_t ldk = s.ldk, ldl = s.ldl, ldw = s.ldw, ldt = s.ldt;
  const T* S = S_in + (p.bh * d.NC + p.c) * K * V;
  const T* dS = dS_in + (p.bh * d.NC + p.c) * K * V;

  tile_load_rows(q, d, p.b, p.h, p.t0, n, K, 0, int(K), s.q, ldk);
  tile_load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, ldk);
  tile_commit();
  for (int r = threadIdx.x; r < n; r += blockDim.x) s.gam[r] = gam[row0 + r];
  for (int idx = threadIdx.x; idx < L * L; idx += blockDim.x)
    s.dP[(idx / L) * ldl + idx % L] = 0.0f;
  for (int idx = threadIdx.x; idx < L * K; idx += blockDim.x) {
    const int64_t e = (idx / K) * ldw + idx % K;
    s.dqS[e] = s.dKh[e] = s.dW[e] = 0.0f;
  }
  float sd = 0.0f;  // this thread's part of <dS', S>
  for (int64_t c0 = 0; c0 < V; c0 += kQkVt) {
    const int w = int(V - c0 < kQkVt ? V - c0 : kQkVt);
    __syncthreads();  // accumulators zeroed; the previous tile no longer read
    tile_load_rows(dO, d, p.b, p.h, p.t0, n, V, c0, w, s.dO, ldt);
    tile_load_scratch(Vn, row0, n, V, c0, w, s.Vn, ldt);
    tile_load_scratch(dVn, row0, n, V, c0, w, s.dVn, ldt);
    tile_load_scratch(S, 0, int(K), V, c0, w, s.S, ldt);
    tile_load_scratch(dS, 0, int(K), V, c0, w, s.dS, ldt);
    tile_commit();
    tile_wait();
    __syncthreads();
    // The V reductions, tile by tile (each accumulator element stays with one thread).
    block_mm_t<T>(
        n, n, w, RowA<T>{s.dO, ldt}, ColB<T>{s.Vn, ldt},
        Epi{[&](int r, int j, float x) { s.dP[r * ldl + j] += x; },
            [&](int r, int j, float x0, float x1) { axpy2(s.dP, r * ldl + j, 1.0f, x0, x1); }});
    block_mm_t<T>(
        n, int(K), w, RowA<T>{s.dO, ldt}, ColB<T>{s.S, ldt},
        Epi{[&](int r, int i, float x) { s.dqS[r * ldw + i] += x; },
            [&](int r, int i, float x0, float x1) { axpy2(s.dqS, r * ldw + i, 1.0f, x0, x1); }});
    block_mm_t<T>(
        n, int(K), w, RowA<T>{s.Vn, ldt}, ColB<T>{s.dS, ldt},
        Epi{[&](int j, int i, float x) { s.dKh[j * ldw + i] += x; },
            [&](int j, int i, float x0, float x1) { axpy2(s.dKh, j * ldw + i, 1.0f, x0, x1); }});
    block_mm_t<T>(
        n, int(K), w, RowA<T>{s.dVn, ldt}, ColB<T>{s.S, ldt},
        Epi{[&](int r, int i, float x) { s.dW[r * ldw + i] -= x; },
            [&](int r, int i, float x0, float x1) { axpy2(s.dW, r * ldw + i, 1.0f, -x0, -x1); }});
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      sd += to_f32(s.dS[i * ldt + c]) * to_f32(s.S[i * ldt + c]);
    }
  }
  __syncthreads();  // the V tiles no longer read: P takes their place
  sd = block_sum(sd, s.red);
  bwd_qk_finish(s, p, d, scale, sd, dq, dk_part, dgam_part, dW_out);
}

// The finish of the register bwd_qk kernels (gdn_bwd_qk_reg_kernel, gdn_bwd_qk_stream_kernel) once
// their V loop has left, in each warp's MMA accumulators, its tiles of dP (dp), dqS (dqs),
// dKh (dkh) and dW (dw) and in sd this thread's part of <dS', S>. Given the shared arrays it
// works in, the warp's place in the block, and the chunk (n rows of R, K columns; x0 the token
// index of row 0, row0 its scratch row). Block-wide (barriers); it reads s.q, s.k and s.gam and
// writes s.dP, s.P, s.parts, s.x, s.rp and s.red, nothing else of shared memory.
struct QkFinishSmem {
  const bf16_t *q, *k;
  int64_t ldk;
  float *gam, *dP, *P, *parts, *x, *rp, *red;
  int64_t ldl;
};
struct QkWarp {
  int lane, warp, g, t, m0, wc, h0, p0;
  bool active;
};
template <int KS>
__device__ __forceinline__ void qk_reg_finish(const QkFinishSmem& s, const QkWarp& wp, int n, int R,
                                              int K, int64_t H, int64_t x0, int64_t row0,
                                              float scale, float sd,
                                              float (&dp)[2 * (2 / KS)][4], float (&dqs)[4][4],
                                              float (&dkh)[4][4], float (&dw)[4][4],
                                              bf16_t* __restrict__ dq, float* __restrict__ dk_part,
                                              float* __restrict__ dgam_part,
                                              bf16_t* __restrict__ dW_out) {
  constexpr int kDpPairs = 2 / KS;
  const int lane = wp.lane, warp = wp.warp, g = wp.g, t = wp.t, m0 = wp.m0, wc = wp.wc;
  const int h0 = wp.h0, p0 = wp.p0;
  const bool active = wp.active;
  // The finish with dqS, dKh and dW kept in the warps' accumulators: only dP goes
  // to shared memory (the warps' products need all of its columns); each warp then computes its
  // rows x columns of dq and dk with MMAs on the dP tile and stores dq, the dk partial and dW
  // from its fragments, and its parts of the K reductions k_j . dKh_j and q_r . (S dO_r) by
  // shuffles over the row's lanes. The dq, dk and dW bits are those of bwd_qk_finish (the same
  // products in the same k order; dP past the chunk is zero either way); x and rp sum the K
  // reductions in another order. ncu (RESULTS.md, 2026-12-02): bwd_qk_finish's f32 round trip
  // of the three [R, K] sums and its per-row SIMT reductions made the kernel issue-bound (this
  // kernel finished that way until session 7: 1004 us against 926 at H16 K128 V256).
  if (active) {
#pragma unroll
    for (int j = 0; j < 2 * kDpPairs; ++j) {
      const int cp = p0 + 8 * j + 2 * t;
#pragma unroll
      for (int hi = 0; hi < 2; ++hi)
        if (cp < R)
          *reinterpret_cast<float2*>(s.dP + (m0 + g + 8 * hi) * s.ldl + cp) =
              make_float2(dp[j][2 * hi], dp[j][2 * hi + 1]);
    }
  }
  __syncthreads();
  sd = block_sum(sd, s.red);
  const int64_t ldk = s.ldk, ldl = s.ldl;
  bwd_qk_p(s.q, s.k, ldk, s.gam, s.dP, s.P, ldl, n, K, scale);
  __syncthreads();
  const float glast = s.gam[n - 1];
  float* const kdp = s.parts;               // [2 KS][R]: the warps' parts of k_j . dKh_j
  float* const qdp = s.parts + 2 * KS * R;  // [2 KS][R]: ... of q_r . (S dO_r)
  if (active) {
    const int r0 = m0 + g, r1 = r0 + 8;
    const float e0 = exp_t<bf16_t>(s.gam[r0]), e1 = exp_t<bf16_t>(s.gam[r1]);
    const float d0 = exp_t<bf16_t>(glast - s.gam[r0]), d1 = exp_t<bf16_t>(glast - s.gam[r1]);
    float kd0 = 0.0f, kd1 = 0.0f, qd0 = 0.0f, qd1 = 0.0f;
    // dq_r = scale (e_r (S dO)_r + sum_{j <= r} dP_rj D_rj k_j): k blocks up to the row block.
    float acc[4][4];
    finish_product(acc, RowA<float>{s.dP, ldl}, s.k, ldk, 0, m0 + 16, m0, h0, K, lane);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = h0 + 8 * j + 2 * t;
      if (c < K) {
        const float2 q0 = load_bf16x2(s.q + r0 * ldk + c), q1 = load_bf16x2(s.q + r1 * ldk + c);
        qd0 += q0.x * dqs[j][0] + q0.y * dqs[j][1];
        qd1 += q1.x * dqs[j][2] + q1.y * dqs[j][3];
        if (r0 < n)
          *reinterpret_cast<uint32_t*>(dq + (x0 + r0 * H) * K + c) =
              mma::pack_bf16x2(scale * (e0 * dqs[j][0] + acc[j][0]),
                               scale * (e0 * dqs[j][1] + acc[j][1]));
        if (r1 < n)
          *reinterpret_cast<uint32_t*>(dq + (x0 + r1 * H) * K + c) =
              mma::pack_bf16x2(scale * (e1 * dqs[j][2] + acc[j][2]),
                               scale * (e1 * dqs[j][3] + acc[j][3]));
      }
    }
    // dk_j (partial) = scale sum_{r >= j} dP_rj D_rj q_r + D_{n-1,j} dKh_j: k blocks from the
    // row block on; dW = -dVn S^T.
    finish_product(acc, ColA<float>{s.dP, ldl}, s.q, ldk, m0, n, m0, h0, K, lane);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = h0 + 8 * j + 2 * t;
      if (c < K) {
        const float2 k0v = load_bf16x2(s.k + r0 * ldk + c), k1v = load_bf16x2(s.k + r1 * ldk + c);
        kd0 += k0v.x * dkh[j][0] + k0v.y * dkh[j][1];
        kd1 += k1v.x * dkh[j][2] + k1v.y * dkh[j][3];
        if (r0 < n) {
          *reinterpret_cast<float2*>(dk_part + (row0 + r0) * K + c) =
              make_float2(scale * acc[j][0] + d0 * dkh[j][0], scale * acc[j][1] + d0 * dkh[j][1]);
          *reinterpret_cast<uint32_t*>(dW_out + (row0 + r0) * K + c) =
              mma::pack_bf16x2(-dw[j][0], -dw[j][1]);
        }
        if (r1 < n) {
          *reinterpret_cast<float2*>(dk_part + (row0 + r1) * K + c) =
              make_float2(scale * acc[j][2] + d1 * dkh[j][2], scale * acc[j][3] + d1 * dkh[j][3]);
          *reinterpret_cast<uint32_t*>(dW_out + (row0 + r1) * K + c) =
              mma::pack_bf16x2(-dw[j][2], -dw[j][3]);
        }
      }
    }
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      kd0 += __shfl_xor_sync(0xffffffffu, kd0, o);
      kd1 += __shfl_xor_sync(0xffffffffu, kd1, o);
      qd0 += __shfl_xor_sync(0xffffffffu, qd0, o);
      qd1 += __shfl_xor_sync(0xffffffffu, qd1, o);
    }
    if (t == 0) {
      kdp[wc * R + r0] = kd0;
      kdp[wc * R + r1] = kd1;
      qdp[wc * R + r0] = qd0;
      qdp[wc * R + r1] = qd1;
    }
  }
  __syncthreads();
  // x_j = D_{n-1,j} k_j . dKh_j and rp_r = scale e_r q_r.(S dO_r) + sum_j dP_rj P_rj: a warp per
  // row, the lanes along P's row.
  {
    const int nw = int(blockDim.x) / 32;
    for (int r = warp; r < n; r += nw) {  // warp-uniform (warp_sum)
      float ps = 0.0f;
      for (int j = lane; j < n; j += 32) ps += s.P[r * ldl + j];
      ps = warp_sum(ps);
      if (lane == 0) {
        float kd = 0.0f, qd = 0.0f;
        for (int w = 0; w < 2 * KS; ++w) {
          kd += kdp[w * R + r];
          qd += qdp[w * R + r];
        }
        s.x[r] = exp_t<bf16_t>(glast - s.gam[r]) * kd;
        s.rp[r] = scale * exp_t<bf16_t>(s.gam[r]) * qd + ps;
      }
    }
  }
  __syncthreads();
  bwd_qk_dgam<bf16_t>(s.rp, s.x, s.P, ldl, n, glast, sd, dgam_part + row0);
}

// bwd_qk with the V reductions in MMA accumulator registers (bf16, K <= 128, V a multiple of 16;
// AMOR_GDN_QK=tile keeps the kernel above). KS = K / 64 rounded up (1 or 2) sets the block: 8 KS
// warps, 2 KS per 16-row group. Warp w owns rows 16 (w / 2KS) .. + 16, the 32 columns
// 32 (w % 2KS) .. + 32 of dqS, dKh and dW and the 32 / KS columns (32 / KS) (w % 2KS) .. of dP, so
// the four sums stay in registers (<= 4 n8 tiles each, 2 of dP for KS = 2) over all of V and reach
// shared memory once, where the kernel above adds every 32-column tile into them there (a read and
// a write of 64 KB of f32 per tile) and waits for each tile's copies with nothing in flight. For
// K = 128 (KS = 2: 16 warps, one 164 KB block per SM) each warp keeps 56 accumulators, fewer than
// the 64 of K = 64's 8 warps, instead of 112 that one 8-warp block would need. The V tiles
// (64 columns: dO, Vn, dVn, S, dS') are double-buffered, so for V <= 128 every copy of the block is
// issued up front. Rows past the chunk are zero-filled; R = reg_rows(d) rows throughout. Rounding
// as the kernel above (bf16 operands, f32 sums; only the order of the f32 additions over V differs).
template <int KS, class Sh>
__global__ void __launch_bounds__(kThreads * KS, 2 / KS)
    gdn_bwd_qk_reg_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                          const bf16_t* __restrict__ dO, const float* __restrict__ gam,
                          const bf16_t* __restrict__ Vn, const bf16_t* __restrict__ dVn,
                          const bf16_t* __restrict__ S_in, const bf16_t* __restrict__ dS_in,
                          float scale, Dims d, bf16_t* __restrict__ dq,
                          float* __restrict__ dk_part, float* __restrict__ dgam_part,
                          bf16_t* __restrict__ dW_out) {
  extern __shared__ float smem[];
  const ChunkPos p = chunk_pos<Sh>(d);
  Carve carve{smem};
  BwdQkRegSmem<bf16_t> s(carve, d);
  const int n = p.n, R = int(reg_rows(d)), K = int(d.K);
  const int64_t V = d.V, row0 = p.bh * d.T + p.t0, x0 = (p.b * d.T + p.t0) * d.H + p.h;
  const int64_t ldt = s.ldt;
  const bf16_t* S = S_in + (p.bh * d.NC + p.c) * K * V;
  const bf16_t* dS = dS_in + (p.bh * d.NC + p.c) * K * V;
  const int tiles = int((V + kQkRegVt - 1) / kQkRegVt);
  auto width = [&](int it) {  // columns of V tile it
    const int64_t left = V - int64_t(it) * kQkRegVt;
    return int(left < kQkRegVt ? left : kQkRegVt);
  };
  auto load_tile = [&](int it, int buf) {  // V columns it * 64 .. of dO, Vn, dVn, S, dS'
    const int64_t c0 = int64_t(it) * kQkRegVt;
    const int w = width(it);
    tile_load_zfill(dO + x0 * V + c0, d.H * V, n, R, w, pick(s.dO, buf), ldt);
    tile_load_zfill(Vn + row0 * V + c0, V, n, R, w, pick(s.Vn, buf), ldt);
    tile_load_zfill(dVn + row0 * V + c0, V, n, R, w, pick(s.dVn, buf), ldt);
    tile_load_zfill(S + c0, V, K, K, w, pick(s.S, buf), ldt);
    tile_load_zfill(dS + c0, V, K, K, w, pick(s.dS, buf), ldt);
  };

  tile_load_zfill(q + x0 * K, d.H * K, n, R, K, s.q, s.ldk);
  tile_load_zfill(k + x0 * K, d.H * K, n, R, K, s.k, s.ldk);
  load_tile(0, 0);
  tile_commit();
  if (tiles > 1) {
    load_tile(1, 1);
    tile_commit();
  }
  for (int r = threadIdx.x; r < n; r += blockDim.x) s.gam[r] = gam[row0 + r];

  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  constexpr int kDpPairs = 2 / KS;  // n16 column pairs of dP per warp
  const int m0 = 16 * (warp / (2 * KS)), wc = warp % (2 * KS);  // this warp's rows, column slot
  const int h0 = 32 * wc, p0 = 16 * kDpPairs * wc;  // its first column of dqS/dKh/dW, of dP
  const bool active = m0 < R;                       // warp-uniform
  // Column pairs of n8 tiles (16 columns): of dP at p0 + 16 jp if < R, of dqS, dKh, dW at
  // h0 + 16 jp if < K (R and K are multiples of 16: a pair is all in or all out).
  float dp[2 * kDpPairs][4], dqs[4][4], dkh[4][4], dw[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dqs[j][e] = dkh[j][e] = dw[j][e] = 0.0f;
      if (j < 2 * kDpPairs) dp[j][e] = 0.0f;
    }
  float sd = 0.0f;  // this thread's part of <dS', S>
  for (int it = 0; it < tiles; ++it) {
    const int buf = it & 1, w = width(it);
    if (it + 1 < tiles)
      tile_wait<1>();  // tile it's copies (tile it + 1's may stay in flight)
    else
      tile_wait<0>();
    __syncthreads();
    const bf16_t *dOt = pick(s.dO, buf), *Vnt = pick(s.Vn, buf), *dVnt = pick(s.dVn, buf);
    const bf16_t *St = pick(s.S, buf), *dSt = pick(s.dS, buf);
    if (active) {
#pragma unroll 1
      for (int k0 = 0; k0 < w; k0 += 16) {
        uint32_t ao[4], av[4], ad[4];
        tile::frag_a(ao, dOt, ldt, m0, k0, lane);
        tile::frag_a(av, Vnt, ldt, m0, k0, lane);
        tile::frag_a(ad, dVnt, ldt, m0, k0, lane);
#pragma unroll
        for (int jp = 0; jp < kDpPairs; ++jp) {
          const int c = p0 + 16 * jp;
          if (c < R) {
            uint32_t b[4];
            tile::frag_b2(b, Vnt, ldt, k0, c, lane);
            tile::mma_x2(dp[2 * jp], dp[2 * jp + 1], ao, b);
          }
        }
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
          const int c = h0 + 16 * jp;
          uint32_t b[4];
          if (c < K) {
            tile::frag_b2(b, St, ldt, k0, c, lane);
            tile::mma_x2(dqs[2 * jp], dqs[2 * jp + 1], ao, b);
            tile::mma_x2(dw[2 * jp], dw[2 * jp + 1], ad, b);
            tile::frag_b2(b, dSt, ldt, k0, c, lane);
            tile::mma_x2(dkh[2 * jp], dkh[2 * jp + 1], av, b);
          }
        }
      }
    }
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      sd += to_f32(dSt[i * ldt + c]) * to_f32(St[i * ldt + c]);
    }
    __syncthreads();  // buffer buf no longer read
    if (it + 2 < tiles) {
      load_tile(it + 2, buf);
      tile_commit();
    }
  }
  qk_reg_finish<KS>(QkFinishSmem{s.q, s.k, s.ldk, s.gam, s.dP, s.P, s.parts, s.x, s.rp, s.red,
                                  s.ldl},
                     QkWarp{lane, warp, g, t, m0, wc, h0, p0, active}, n, R, K, d.H, x0, row0,
                     scale, sd, dp, dqs, dkh, dw, dq, dk_part, dgam_part, dW_out);
}

// ---- bwd_qk streaming chunks (K 128, the presets' V; AMOR_GDN_QK_FORM=stream)
//
// gdn_bwd_qk_reg_kernel at K 128 holds one 16-warp block per SM (128 registers, 164 KB), so
// nothing on the SM overlaps a block's phases: ncu at H16 K128 V256, B8 T2048 (2026-12-02
// session 8, 917 us): DRAM 30% busy, issue slots 49% busy, 423M instructions (103K per chunk)
// against ~9K per chunk of MMAs and fragment loads. Per chunk it reads 256 KB (dO, Vn, dVn:
// 32 KB each; S, dS': 64 KB each; q, k: 16 KB each) and writes 64 KB: 1.31 GB in all, 273 us
// at 4.8 TB/s, while its own loop did 17 MFLOP per chunk on tensor cores (about 3 us of an SM).
// The rest went to (a) waiting with nothing in flight: the block's first tiles are issued only
// when it starts and its finish (dP, P, dq, dk, dgam) runs with no copies in flight, and the
// SM has no other block; (b) <dS', S> as a strided SIMT pass over the S and dS' tiles with a
// 32-bit division per element (the tile width was not a compile-time constant there): ~35
// instructions per element, a third of all; (c) the copies' 64-bit index arithmetic per 16 bytes.
//
// This kernel is the same computation (gdn_bwd_qk_reg_kernel's warp layout, products, rounding
// and finish, qk_reg_finish) made persistent: a grid of one block per SM (AMOR_GDN_QK_BLOCKS
// caps it, for tests of the loop), block i takes chunks i, i + grid, ... in the order of the
// scratch (consecutive blocks, consecutive chunks of a head). Its shared memory keeps the finish's
// arrays (q, k, gam, dP, P, the warps' parts) apart from the double-buffered V tiles, so
//   - the next chunk's first two V tiles are copied while this chunk's last tile is multiplied
//     and while it finishes: tile 0' into buffer 0 once tile V/64 - 2 is done, tile 1' into
//     buffer 1 once the last is; q, k and gam of the next chunk after the finish (they are read
//     last, at the next finish). Groups of copies per chunk, in issue order: t0, t1, qk, t2, ...;
//     before multiplying tile it a thread waits until only the groups issued after t_it remain.
//   - <dS', S> comes from the fragments the MMAs load anyway: the B fragments of S and dS' at
//     (k0, columns h0 ..) hold the same elements in the same registers, and the 4 row groups of
//     warps load the same ones, so row group rg takes the k steps with (k step) % 4 == rg.
//   - the copies have compile-time trip counts and strides (whole 16-byte pieces per thread).
// Shared memory at K 128, V 256: V tiles 2 x 63 KB, q, k 34 KB, dP, P 34 KB, parts 2 KB:
// 197 KB (201,600 bytes), one block per SM. Needs V a multiple of 128 (an even number of
// 64-column tiles).
template <class Sh>
struct ShapeOf;
template <int kK, int kV, int kL, bool kFull>
struct ShapeOf<Shape<kK, kV, kL, kFull>> {
  static constexpr int K = kK, V = kV, L = kL;
  static constexpr bool full = kFull;
};

// The stream kernel's shared memory as offsets (floats, 16-byte aligned) from the block's base:
// the device adds them to the extern array itself, so every access is a shared-space one.
struct QkStreamLayout {
  int64_t ldk, ldl, ldt;  // q, k (bf16); dP, P (f32); the V tiles (bf16)
  int64_t q, k, gam, x, rp, red, dP, P, parts;
  int64_t dO[2], Vn[2], dVn[2], S[2], dS[2];
  int64_t floats = 0;
  __host__ __device__ int64_t take_bf16(int64_t n) { return take((2 * n + 15) / 16 * 4); }
  __host__ __device__ int64_t take(int64_t n) {
    const int64_t at = floats;
    floats += (n + 3) / 4 * 4;
    return at;
  }
  __host__ __device__ explicit QkStreamLayout(const Dims& d)
      : ldk(tile::padded_ld<bf16_t>(d.K)),
        ldl(tile::padded_ld<float>(reg_rows(d))),
        ldt(tile::padded_ld<bf16_t>(kQkRegVt)) {
    const int64_t R = reg_rows(d);
    q = take_bf16(R * ldk);
    k = take_bf16(R * ldk);
    gam = take(R);
    x = take(R);
    rp = take(R);
    red = take(32);
    dP = take(R * ldl);
    P = take(R * ldl);
    parts = take(4 * (d.K > 64 ? 2 : 1) * R);
    for (int i = 0; i < 2; ++i) {
      dO[i] = take_bf16(R * ldt);
      Vn[i] = take_bf16(R * ldt);
      dVn[i] = take_bf16(R * ldt);
      S[i] = take_bf16(d.K * ldt);
      dS[i] = take_bf16(d.K * ldt);
    }
  }
  int64_t bytes() const { return floats * 4; }
};

// ROWS x COLS bf16 (COLS a multiple of 8) from global rows src + r * gstride to shared
// dst + r * ld, rows >= valid zero-filled; NT threads, each issuing whole 16-byte pieces with
// compile-time strides. Not collective.
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void copy_rows(const bf16_t* src, int64_t gstride, int valid,
                                          bf16_t* dst, int64_t ld) {
  constexpr int kVpr = COLS / 8, kCount = ROWS * kVpr;
  const int tid = int(threadIdx.x);
#pragma unroll
  for (int j = 0; j < (kCount + NT - 1) / NT; ++j) {
    const int idx = tid + j * NT;
    if (kCount % NT == 0 || idx < kCount) {
      const int r = idx / kVpr, c = (idx % kVpr) * 8;
      mma::cp_async_16(dst + r * ld + c, src + (r < valid ? r : 0) * gstride + c, r < valid);
    }
  }
}

// Waits until at most n (0 .. 3) groups of this thread's copies are in flight.
__device__ __forceinline__ void tile_wait_n(int n) {
  switch (n) {
    case 0:
      tile_wait<0>();
      break;
    case 1:
      tile_wait<1>();
      break;
    case 2:
      tile_wait<2>();
      break;
    default:
      tile_wait<3>();
  }
}

// acc + the dot product of two bf16 pairs (f32 products and sums).
__device__ __forceinline__ float dot_bf16x2(uint32_t a, uint32_t b, float acc) {
  const uint32_t alo = a << 16, ahi = a & 0xffff0000u, blo = b << 16, bhi = b & 0xffff0000u;
  float fa, fb, ga, gb;
  memcpy(&fa, &alo, 4);
  memcpy(&fb, &blo, 4);
  memcpy(&ga, &ahi, 4);
  memcpy(&gb, &bhi, 4);
  return fmaf(ga, gb, fmaf(fa, fb, acc));
}

template <class Sh>
__global__ void __launch_bounds__(kThreads * 2, 1)
    gdn_bwd_qk_stream_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                             const bf16_t* __restrict__ dO, const float* __restrict__ gam,
                             const bf16_t* __restrict__ Vn, const bf16_t* __restrict__ dVn,
                             const bf16_t* __restrict__ S_in, const bf16_t* __restrict__ dS_in,
                             float scale, Dims d, bf16_t* __restrict__ dq,
                             float* __restrict__ dk_part, float* __restrict__ dgam_part,
                             bf16_t* __restrict__ dW_out) {
  using SO = ShapeOf<Sh>;
  constexpr int KS = 2, K = SO::K, V = SO::V, NT = kThreads * KS;
  constexpr int kTiles = V / kQkRegVt;
  static_assert(K > 64 && K <= 128 && K % 16 == 0, "the 16-warp layout: K 80 .. 128");
  static_assert(V % (2 * kQkRegVt) == 0, "an even number of 64-column V tiles");
  Sh::fix(d);
  extern __shared__ float smem[];
  const QkStreamLayout lay(d);
  const int R = int(reg_rows(d));
  constexpr int kRows = ((SO::L + 15) / 16) * 16;  // R, at compile time
  const int64_t ldt = lay.ldt, ldk = lay.ldk;
  bf16_t* const sq = reinterpret_cast<bf16_t*>(smem + lay.q);
  bf16_t* const sk = reinterpret_cast<bf16_t*>(smem + lay.k);
  float* const sgam = smem + lay.gam;
  auto tile = [&](const int64_t (&off)[2], int buf) {
    return reinterpret_cast<bf16_t*>(smem + (buf ? off[1] : off[0]));
  };
  const int64_t H = d.H, NC = d.NC, total = d.B * H * NC;
  auto pos_of = [&](int64_t idx) {  // chunk idx of the scratch order (b, h, c)
    ChunkPos p;
    p.c = idx % NC;
    p.bh = idx / NC;
    p.b = p.bh / H;
    p.h = p.bh - p.b * H;
    p.t0 = p.c * d.L;
    p.n = SO::full ? d.L : int(d.T - p.t0 < d.L ? d.T - p.t0 : d.L);
    return p;
  };
  auto load_tile = [&](const ChunkPos& p, int it, int buf) {  // V columns it * 64 ..
    const int64_t c0 = int64_t(it) * kQkRegVt, x0 = (p.b * d.T + p.t0) * H + p.h;
    const int64_t row0 = p.bh * d.T + p.t0, st = (p.bh * NC + p.c) * K * V + c0;
    copy_rows<kRows, kQkRegVt, NT>(dO + x0 * V + c0, H * V, p.n, tile(lay.dO, buf), ldt);
    copy_rows<kRows, kQkRegVt, NT>(Vn + row0 * V + c0, V, p.n, tile(lay.Vn, buf), ldt);
    copy_rows<kRows, kQkRegVt, NT>(dVn + row0 * V + c0, V, p.n, tile(lay.dVn, buf), ldt);
    copy_rows<K, kQkRegVt, NT>(S_in + st, V, K, tile(lay.S, buf), ldt);
    copy_rows<K, kQkRegVt, NT>(dS_in + st, V, K, tile(lay.dS, buf), ldt);
  };
  auto load_qk = [&](const ChunkPos& p) {  // q, k and gam of the chunk
    const int64_t x0 = (p.b * d.T + p.t0) * H + p.h;
    copy_rows<kRows, K, NT>(q + x0 * K, H * K, p.n, sq, ldk);
    copy_rows<kRows, K, NT>(k + x0 * K, H * K, p.n, sk, ldk);
    vec_load_zfill(gam + p.bh * d.T + p.t0, p.n, R, sgam);
  };

  int64_t idx = blockIdx.x;
  if (idx >= total) return;  // block-uniform
  ChunkPos p = pos_of(idx);
  load_tile(p, 0, 0);
  tile_commit();
  load_tile(p, 1, 1);
  tile_commit();
  load_qk(p);
  tile_commit();

  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  const int rg = warp / (2 * KS), m0 = 16 * rg, wc = warp % (2 * KS);  // row group, column slot
  const int h0 = 32 * wc, p0 = 16 * wc;  // first column of dqS/dKh/dW, of dP (one n16 pair)
  const bool active = m0 < R;            // warp-uniform
  for (;;) {
    const int64_t next = idx + gridDim.x;
    const bool has_next = next < total;  // block-uniform
    const ChunkPos pn = pos_of(has_next ? next : idx);
    float dp[2][4], dqs[4][4], dkh[4][4], dw[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        dqs[j][e] = dkh[j][e] = dw[j][e] = 0.0f;
        if (j < 2) dp[j][e] = 0.0f;
      }
    float sd = 0.0f;  // this thread's part of <dS', S>
#pragma unroll 1
    for (int it = 0; it < kTiles; ++it) {
      const int buf = it & 1;
      // Groups issued after t_it when tile it is due: t_{it+1} (issued at tile it - 1, or up
      // front), qk (up front, after t1) for it <= 1, and the next chunk's t0' (issued at tile
      // kTiles - 2) for the last tile.
      const int after = (it + 1 < kTiles ? 1 : 0) + (it <= 1 ? 1 : 0) +
                        (it == kTiles - 1 && has_next ? 1 : 0);
      tile_wait_n(after);
      __syncthreads();
      const bf16_t *dOt = tile(lay.dO, buf), *Vnt = tile(lay.Vn, buf), *dVnt = tile(lay.dVn, buf);
      const bf16_t *St = tile(lay.S, buf), *dSt = tile(lay.dS, buf);
      if (active) {
#pragma unroll 1
        for (int k0 = 0; k0 < kQkRegVt; k0 += 16) {
          uint32_t ao[4], av[4], ad[4];
          tile::frag_a(ao, dOt, ldt, m0, k0, lane);
          tile::frag_a(av, Vnt, ldt, m0, k0, lane);
          tile::frag_a(ad, dVnt, ldt, m0, k0, lane);
          if (p0 < R) {
            uint32_t b[4];
            tile::frag_b2(b, Vnt, ldt, k0, p0, lane);
            tile::mma_x2(dp[0], dp[1], ao, b);
          }
          const bool dot = ((it * kQkRegVt + k0) / 16) % (kRows / 16) == rg;  // warp-uniform
#pragma unroll
          for (int jp = 0; jp < 2; ++jp) {
            const int c = h0 + 16 * jp;
            if (c < K) {
              uint32_t sb[4], eb[4];
              tile::frag_b2(sb, St, ldt, k0, c, lane);
              tile::frag_b2(eb, dSt, ldt, k0, c, lane);
              tile::mma_x2(dqs[2 * jp], dqs[2 * jp + 1], ao, sb);
              tile::mma_x2(dw[2 * jp], dw[2 * jp + 1], ad, sb);
              tile::mma_x2(dkh[2 * jp], dkh[2 * jp + 1], av, eb);
              if (dot) {
                sd = dot_bf16x2(sb[0], eb[0], sd);
                sd = dot_bf16x2(sb[1], eb[1], sd);
                sd = dot_bf16x2(sb[2], eb[2], sd);
                sd = dot_bf16x2(sb[3], eb[3], sd);
              }
            }
          }
        }
      }
      __syncthreads();  // buffer buf no longer read
      if (it + 2 < kTiles) {
        load_tile(p, it + 2, buf);
        tile_commit();
      } else if (has_next) {
        load_tile(pn, it + 2 - kTiles, buf);
        tile_commit();
      }
    }
    // q, k, gam: only the next chunk's t0' and t1' may stay in flight. The finish's first
    // barrier (after dP is stored) makes them visible before they are read.
    if (has_next)
      tile_wait<2>();
    else
      tile_wait<0>();
    const int64_t x0 = (p.b * d.T + p.t0) * H + p.h, row0 = p.bh * d.T + p.t0;
    qk_reg_finish<KS>(QkFinishSmem{sq, sk, ldk, sgam, smem + lay.dP, smem + lay.P,
                                   smem + lay.parts, smem + lay.x, smem + lay.rp, smem + lay.red,
                                   lay.ldl},
                      QkWarp{lane, warp, g, t, m0, wc, h0, p0, active}, p.n, R, K, H, x0, row0,
                      scale, sd, dp, dqs, dkh, dw, dq, dk_part, dgam_part, dW_out);
    if (!has_next) break;
    __syncthreads();  // q, k, gam, dP, P and the parts no longer read
    load_qk(pn);
    tile_commit();
    idx = next;
    p = pn;
  }
}

// Two blocks per SM (91 KB of shared memory for bf16).
template <class T, class Sh>
__global__ void __launch_bounds__(kThreads, 2)
    gdn_bwd_wy_kernel(const T* __restrict__ k, const T* __restrict__ v, const void* beta,
                      bool gate_f32, const float* __restrict__ gam, const T* __restrict__ Tm,
                      const T* __restrict__ dVn, const T* __restrict__ dW,
                      const float* __restrict__ dk_part, const float* __restrict__ dgam_part,
                      Dims d, T* __restrict__ dk, T* __restrict__ dv, float* __restrict__ dg,
                      float* __restrict__ dbeta) {
  extern __shared__ float smem[];
  const ChunkPos p = chunk_pos<Sh>(d);
  Carve carve{smem};
  BwdWySmem<T> s(carve, d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0;
  const int64_t ldk = s.ldk, ldz = s.ldz, ldl = s.ldl, ldtm = s.ldtm, ldv = s.ldv;
  auto tok = [&](int r) { return (p.b * d.T + p.t0 + r) * d.H + p.h; };

  // The V tiles are double-buffered: tile it + 1's copies are in flight while tile it is
  // multiplied (the first while dW K^T is).
  const int tiles = int((V + kVt - 1) / kVt);
  auto load_tile = [&](int it, int buf) {
    const int64_t c0 = int64_t(it) * kVt;
    const int w = int(V - c0 < kVt ? V - c0 : kVt);
    tile_load_rows(v, d, p.b, p.h, p.t0, n, V, c0, w, pick(s.v, buf), ldv);
    tile_load_scratch(dVn, row0, n, V, c0, w, pick(s.dVn, buf), ldv);
  };
  tile_load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, ldk);
  tile_load_scratch(dW, row0, n, K, 0, int(K), s.dW, ldk);
  tile_load_scratch(Tm, row0, n, L, 0, L, s.Tm, ldtm);
  tile_commit();
  load_tile(0, 0);
  tile_commit();
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    s.gam[r] = gam[row0 + r];
    s.beta[r] = load_any(beta, tok(r), gate_f32);
    s.dgam[r] = dgam_part[row0 + r];
    s.dbeta[r] = 0.0f;
  }
  tile_wait<1>();  // k, dW, Tm (tile 0 may stay in flight)
  __syncthreads();
  // dTm_rj = beta_j e_j (dW_r . k_j) for j <= r; the V part joins tile by tile below.
  block_mm_t<T>(n, n, int(K), RowA<T>{s.dW, ldk}, ColB<T>{s.k, ldk}, [&](int r, int j, float x) {
    s.dTm[r * ldl + j] = j <= r ? s.beta[j] * exp_t<T>(s.gam[j]) * x : 0.0f;
  });
  // dbeta_j's V part, v_j . y_j: lane c of the warp of row j (rows j = warp + 8 q) keeps column c's
  // products of every V tile in vy[q]; one warp sum per row after the loop.
  constexpr int kRowsPerWarp = int(kGdnMaxChunk) / (kThreads / 32);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int nwarps = int(blockDim.x) / 32;
  float vy[kRowsPerWarp];
#pragma unroll
  for (int q = 0; q < kRowsPerWarp; ++q) vy[q] = 0.0f;
  for (int it = 0; it < tiles; ++it) {
    const int64_t c0 = int64_t(it) * kVt;
    const int w = int(V - c0 < kVt ? V - c0 : kVt), buf = it & 1;
    __syncthreads();  // the previous tile (buffer buf ^ 1) and y no longer read
    if (it + 1 < tiles) {
      load_tile(it + 1, buf ^ 1);
      tile_commit();
      tile_wait<1>();  // tile it's copies
    } else {
      tile_wait<0>();
    }
    __syncthreads();
    const T *vt = pick(s.v, buf), *dVnt = pick(s.dVn, buf);
    // dTm_rj += beta_j (dVn_r . v_j)
    block_mm_t<T>(n, n, w, RowA<T>{dVnt, ldv}, ColB<T>{vt, ldv}, [&](int r, int j, float x) {
      if (j <= r) s.dTm[r * ldl + j] += s.beta[j] * x;
    });
    // y_j = sum_{r>=j} Tm_rj dVn_r;  dv_j = beta_j y_j
    block_mm_t<T, Tri::kUpper>(n, w, n, ColA<T>{s.Tm, ldtm}, RowB<T>{dVnt, ldv},
                               Epi{[&](int j, int c, float y) {
                                     s.y[j * kVs + c] = y;
                                     dv[tok(j) * V + c0 + c] = from_f32<T>(s.beta[j] * y);
                                   },
                                   [&](int j, int c, float y0, float y1) {
                                     s.y[j * kVs + c] = y0;
                                     s.y[j * kVs + c + 1] = y1;
                                     store2(dv, tok(j) * V + c0 + c, s.beta[j] * y0,
                                            s.beta[j] * y1);
                                   }});
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kRowsPerWarp; ++q) {
      const int j = warp + nwarps * q;
      if (j < n && lane < w) vy[q] += to_f32(vt[j * ldv + lane]) * s.y[j * kVs + lane];
    }
  }
#pragma unroll
  for (int q = 0; q < kRowsPerWarp; ++q) {  // warp-uniform (warp_sum)
    const int j = warp + nwarps * q;
    const float sum = warp_sum(vy[q]);
    if (j < n && lane == 0) s.dbeta[j] += sum;
  }
  __syncthreads();
  // z_j = sum_{r>=j} Tm_rj dW_r (into the V tiles' place, no longer read);  M = Tm^T dTm
  block_mm_t<T, Tri::kUpper>(n, int(K), n, ColA<T>{s.Tm, ldtm}, RowB<T>{s.dW, ldk},
                             [&](int j, int i, float z) { s.z[j * ldz + i] = z; });
  block_mm_t<T, Tri::kUpper>(n, n, n, ColA<T>{s.Tm, ldtm}, RowB<float>{s.dTm, ldl},
                             [&](int r, int c, float m) { s.M[r * ldl + c] = m; });
  __syncthreads();
  // w_j = e_j (k_j . z_j): dbeta_j += w_j, dgam_j += beta_j w_j (a warp per row, lanes along it)
  {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int j = int(threadIdx.x) / 32; j < n; j += nw) {  // warp-uniform (warp_sum)
      float kz = 0.0f;
      for (int i = lane; i < K; i += 32) kz += to_f32(s.k[j * ldk + i]) * s.z[j * ldz + i];
      kz = warp_sum(kz);
      if (lane == 0) {
        const float wj = exp_t<T>(s.gam[j]) * kz;
        s.dbeta[j] += wj;
        s.dgam[j] += s.beta[j] * wj;
      }
    }
  }
  // dA = -(Tm^T dTm) Tm^T, strictly lower, into dTm (no longer read).
  block_mm_t<T>(n, n, n, RowA<float>{s.M, ldl}, ColB<T>{s.Tm, ldtm},
                [&](int r, int j, float x) { s.dTm[r * ldl + j] = j < r ? -x : 0.0f; });
  __syncthreads();
  // The Gram matrix G_rj = k_r . k_j, into M (no longer read).
  block_mm_t<T>(n, n, int(K), RowA<T>{s.k, ldk}, ColB<T>{s.k, ldk},
                [&](int r, int j, float x) { s.M[r * ldl + j] = x; });
  __syncthreads();
  // A_rj = beta_r G_rj D_rj: with t_rj = dA_rj G_rj D_rj (j < r),
  //   dbeta_r += sum_j t_rj,   dgam_r += beta_r sum_j t_rj - sum_{r'>r} beta_r' t_r'r,
  // and dk_r += sum_j (E_rj + E_jr) k_j with E_rj = dA_rj beta_r D_rj. One elementwise pass (a warp
  // per row, lanes along it: no index division, and the row sums of t in the same pass) puts t
  // into M (the Gram matrix, not read after) and E into dTm (in place), zero for j >= r.
  {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int r = int(threadIdx.x) / 32; r < n; r += nw) {  // warp-uniform (warp_sum)
      float ts = 0.0f;
      for (int j = lane; j < n; j += 32) {
        float t = 0.0f;
        if (j < r) {
          const float D = exp_t<T>(s.gam[r] - s.gam[j]), dA = s.dTm[r * ldl + j];
          t = s.M[r * ldl + j] * (dA * D);
          s.dTm[r * ldl + j] = dA * s.beta[r] * D;
        }
        s.M[r * ldl + j] = t;
        ts += t;
      }
      ts = warp_sum(ts);
      if (lane == 0) {
        s.dbeta[r] += ts;
        s.dgam[r] += s.beta[r] * ts;
      }
    }
  }
  __syncthreads();
  // Column sums of diag(beta) t: a thread per column.
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float cs = 0.0f;
    for (int r2 = r + 1; r2 < n; ++r2) cs += s.beta[r2] * s.M[r2 * ldl + r];
    s.dgam[r] -= cs;
  }
  __syncthreads();
  block_mm_t<T>(
      n, int(K), n, [&](int r, int j) { return s.dTm[r * ldl + j] + s.dTm[j * ldl + r]; },
      RowB<T>{s.k, ldk},
      Epi{[&](int r, int i, float x) {
            dk[tok(r) * K + i] = from_f32<T>(dk_part[(row0 + r) * K + i] +
                                             s.beta[r] * exp_t<T>(s.gam[r]) * s.z[r * ldz + i] + x);
          },
          [&](int r, int i, float x0, float x1) {
            const float be = s.beta[r] * exp_t<T>(s.gam[r]);
            const float* part = dk_part + (row0 + r) * K + i;
            store2(dk, tok(r) * K + i, part[0] + be * s.z[r * ldz + i] + x0,
                   part[1] + be * s.z[r * ldz + i + 1] + x1);
          }});
  // dg = reverse cumulative sum of dgam inside the chunk: row r sums dgam_{n-1} .. dgam_r in that
  // order (the sequential sum's rounding), all rows at once; dbeta.
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float rev = 0.0f;
    for (int m = n - 1; m >= r; --m) rev += s.dgam[m];
    dg[tok(r)] = rev;
    dbeta[tok(r)] = s.dbeta[r];
  }
}


// bwd_wy with the products in MMA fragments: bf16, K one of kRegStateK, V and the chunk multiples
// of 16 (AMOR_GDN_WY=tile keeps the kernel above). Warp m of kWyWarps owns the chunk's rows
// B = [16 m, 16 m + 16) and computes every row-indexed result of them, keeping each product's C
// fragments in registers and feeding them to the next product as A fragments (mma.cuh: a C
// fragment pair packed is an A fragment):
//   dTm_B = (dW_B K^T diag(e) + dVn_B V^T) diag(beta), kept for c <= r (lower, with the diagonal)
//             A = dW_B, dVn_B (ldmatrix), B = K^T, V^T (ldmatrix); column blocks <= m only; the
//             columns scaled by e_c after the K part, by beta_c after the last V tile
//   Y_B   = (Tm^T dVn)_B, per V tile        A = Tm^T (ldmatrix.trans; k blocks >= m: Tm is
//             lower), B = dVn; dv_B = diag(beta) Y_B stored at once, vy_r = v_r . y_r summed by
//             the lanes of the row (partials, then shuffles over t)
//   N_B   = dTm_B Tm^T                      A = dTm_B (its fragments), B = Tm^T (ldmatrix); only
//             column blocks <= m are needed (below) -> shared memory (bf16)
//   dA_B  = -(Tm^T N)_B, j < r              A = Tm^T (k blocks a >= m), B = N (column blocks
//             <= m, written by the warps >= m); G_B = (K K^T)_B, column blocks <= m
//   t_rj  = dA_rj G_rj D_rj,  E_rj = dA_rj beta_r D_rj  (j < r < n, else 0), elementwise on the
//             fragments: ts_r = sum_j t_rj (shuffles over t); the warp's column sums
//             sum_{r in B} beta_r t_rj (shuffles over g) -> csp[m]; E -> shared memory (bf16)
//             and, packed, this warp's A fragments
//   dk_B  = dk_part_B + diag(beta e) Z_B + E_B K + (E^T K)_B,  Z_B = (Tm^T dW)_B
//             in passes of <= 64 columns of K (one accumulator tile): A = Tm^T (k blocks >= m),
//             B = dW; w_r = e_r k_r . z_r from the lanes' partials before the row scaling;
//             A = E_B (registers, k blocks <= m), B = K; A = E^T (ldmatrix.trans, k blocks >= m),
//             B = K; + dk_part (copied into shared memory from the last V tile on, K <= 64,
//             or after the V loop)
//   dbeta_r = vy_r + w_r + ts_r,  dgam_r = dgam_part_r + beta_r (w_r + ts_r)
//                                          - sum_{r' > r} beta_r' t_r'r (the csp of warps >= m)
//   dg    = reverse cumulative sum of dgam inside the chunk (one warp, a suffix sum by shuffles)
// The math is the kernel above's (M = Tm^T dTm there, N = dTm Tm^T here: dA = -Tm^T dTm Tm^T
// either way). The triangles balance the warps of a full chunk: warp m's dTm takes m + 1 column
// blocks and its Y, Z, dA 4 - m k blocks (together 5 per column of V or K), E K and E^T K m + 1
// and 4 - m. Rounding as the kernel above (bf16 operands, f32 sums), except that dTm, N and E
// are rounded to bf16 as operands where the kernel above rounds M and E + E^T. Barriers: one per
// V tile (two where its buffer is refilled), the V tiles done, N written, E written, dgam
// written. R = reg_rows(d) rows, zero-filled past the chunk; a warp past R only joins the copies
// and barriers.
template <int K, class Sh>
__global__ void __launch_bounds__(kWyWarps * 32, K <= 64 ? 3 : 2)
    gdn_bwd_wy_reg_kernel(const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                          const void* beta, bool gate_f32, const float* __restrict__ gam,
                          const bf16_t* __restrict__ Tm, const bf16_t* __restrict__ dVn,
                          const bf16_t* __restrict__ dW, const float* __restrict__ dk_part,
                          const float* __restrict__ dgam_part, Dims d, bf16_t* __restrict__ dk,
                          bf16_t* __restrict__ dv, float* __restrict__ dg,
                          float* __restrict__ dbeta) {
  constexpr int NB = kWyWarps;                // 16-row (and column) blocks of a chunk
  constexpr int KP = K < 64 ? K : 64;         // columns of K per dk pass
  constexpr int KPT = KP / 8;                 // n8 tiles per dk pass
  extern __shared__ float smem[];
  const ChunkPos p = chunk_pos<Sh>(d);
  d.K = K;
  Carve carve{smem};
  BwdWyRegSmem<bf16_t> s(carve, d);
  const int n = p.n, R = int(reg_rows(d));
  const int64_t V = d.V, L = d.L, H = d.H, row0 = p.bh * d.T + p.t0;
  const int64_t x0 = (p.b * d.T + p.t0) * H + p.h;  // token index of row 0 (row r: x0 + r H)
  const int64_t ldk = s.ldk, ldl = s.ldl, ldv = s.ldv, ldp = s.ldp;
  const int tiles = int((V + kWyVt - 1) / kWyVt);
  // The dk partial's copies start in the last V tile when it fits buffer 0 (BwdWyRegSmem), else
  // after the loop.
  const bool early_dkp = K <= 64 && tiles % 2 == 0;
  auto width = [&](int it) {  // columns of V tile it
    const int64_t left = V - int64_t(it) * kWyVt;
    return int(left < kWyVt ? left : kWyVt);
  };
  auto load_tile = [&](int it, int buf) {  // V columns it * 64 .. of v and dVn
    const int64_t c0 = int64_t(it) * kWyVt;
    const int w = width(it);
    tile_load_zfill(v + x0 * V + c0, H * V, n, R, w, pick(s.v, buf), ldv);
    tile_load_zfill(dVn + row0 * V + c0, V, n, R, w, pick(s.dVn, buf), ldv);
  };
  tile_load_zfill(k + x0 * K, H * K, n, R, K, s.k, ldk);
  tile_load_zfill(dW + row0 * K, K, n, R, K, s.dW, ldk);
  tile_load_zfill(Tm + row0 * L, L, n, R, R, s.Tm, ldl);
  vec_load_zfill(gam + row0, n, R, s.gam);
  vec_load_zfill(dgam_part + row0, n, R, s.dgp);
  tile_commit();
  load_tile(0, 0);
  tile_commit();
  if (tiles > 1) {
    load_tile(1, 1);
    tile_commit();
  }
  for (int r = int(threadIdx.x); r < R; r += int(blockDim.x))
    s.beta[r] = r < n ? load_any(beta, x0 + r * H, gate_f32) : 0.0f;

  const int lane = int(threadIdx.x) % 32, mb = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  const int m0 = 16 * mb, r0 = m0 + g, r1 = r0 + 8;  // this lane's rows (fragment rows g, g + 8)
  const bool active = m0 < R;                        // warp-uniform
  const int kb_end = R / 16;                         // k blocks of the chunk
  // dTm_B: n8 tile j is columns 8 j .. (tiles of column blocks > mb stay zero).
  float dtm[2 * NB][4];
#pragma unroll
  for (int j = 0; j < 2 * NB; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dtm[j][e] = 0.0f;
  if (tiles > 1)
    tile_wait<2>();  // k, dW, Tm, gam, dgam_part (the V tiles may stay in flight)
  else
    tile_wait<1>();
  __syncthreads();
  if (active) {
    // dTm_B = dW_B K^T, then the columns scaled by e_c.
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t a[4];
      tile::frag_a(a, s.dW, ldk, m0, k0, lane);
#pragma unroll
      for (int jb = 0; jb < NB; ++jb) {
        if (jb <= mb) {
          uint32_t b[4];
          tile::frag_b2(b, s.k, ldk, k0, 16 * jb, lane);
          tile::mma_x2(dtm[2 * jb], dtm[2 * jb + 1], a, b);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j) {
      if (j / 2 <= mb) {
        const int c = 8 * j + 2 * t;
        const float e0 = exp_t<bf16_t>(s.gam[c]), e1 = exp_t<bf16_t>(s.gam[c + 1]);
        dtm[j][0] *= e0;
        dtm[j][1] *= e1;
        dtm[j][2] *= e0;
        dtm[j][3] *= e1;
      }
    }
  }
  float vy0 = 0.0f, vy1 = 0.0f;  // the lane's parts of v_r . y_r, rows r0, r1
  // Row r0's and r1's outputs in dv and dk (4-byte pairs: V and K are even).
  bf16_t *const dv0 = dv + (x0 + r0 * H) * V, *const dv1 = dv + (x0 + r1 * H) * V;
  bf16_t *const dk0 = dk + (x0 + r0 * H) * K, *const dk1 = dk + (x0 + r1 * H) * K;
  const float beta0 = s.beta[r0 < R ? r0 : 0], beta1 = s.beta[r1 < R ? r1 : 0];
  for (int it = 0; it < tiles; ++it) {
    const int buf = it & 1, w = width(it);
    const int64_t c0 = int64_t(it) * kWyVt;
    if (it + 1 < tiles)
      tile_wait<1>();  // tile it's copies (tile it + 1's may stay in flight)
    else
      tile_wait<0>();
    __syncthreads();
    if (early_dkp && it == tiles - 1) {  // buffer 0 (tile it - 1's) no longer read
      tile_load_zfill(dk_part + row0 * K, K, n, R, K, s.dkp, ldp);
      tile_commit();
    }
    const bf16_t *vt = pick(s.v, buf), *dVnt = pick(s.dVn, buf);
    if (active) {
      // dTm_B += dVn_B V^T over this tile's columns
#pragma unroll
      for (int k0 = 0; k0 < kWyVt; k0 += 16) {
        if (k0 < w) {
          uint32_t a[4];
          tile::frag_a(a, dVnt, ldv, m0, k0, lane);
#pragma unroll
          for (int jb = 0; jb < NB; ++jb) {
            if (jb <= mb) {
              uint32_t b[4];
              tile::frag_b2(b, vt, ldv, k0, 16 * jb, lane);
              tile::mma_x2(dtm[2 * jb], dtm[2 * jb + 1], a, b);
            }
          }
        }
      }
      // Y_B = (Tm^T dVn)_B over this tile's columns: rows j of B sum Tm_rj dVn_r over r >= j.
      float y[kWyVt / 8][4];
#pragma unroll
      for (int j = 0; j < kWyVt / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) y[j][e] = 0.0f;
#pragma unroll
      for (int kb = 0; kb < NB; ++kb) {
        if (kb >= mb && kb < kb_end) {
          uint32_t a[4];
          tile::frag_a_trans(a, s.Tm, ldl, m0, 16 * kb, lane);
#pragma unroll
          for (int jp = 0; jp < kWyVt / 16; ++jp) {
            if (16 * jp < w) {
              uint32_t b[4];
              tile::frag_b2_trans(b, dVnt, ldv, 16 * kb, 16 * jp, lane);
              tile::mma_x2(y[2 * jp], y[2 * jp + 1], a, b);
            }
          }
        }
      }
      // dv = diag(beta) Y (rows < n), and the lanes' parts of v_r . y_r.
#pragma unroll
      for (int j = 0; j < kWyVt / 8; ++j) {
        if (8 * j < w) {
          const int c = 8 * j + 2 * t;
          const float2 v0 = load_bf16x2(vt + r0 * ldv + c), v1 = load_bf16x2(vt + r1 * ldv + c);
          vy0 += v0.x * y[j][0] + v0.y * y[j][1];
          vy1 += v1.x * y[j][2] + v1.y * y[j][3];
          if (r0 < n)
            *reinterpret_cast<uint32_t*>(dv0 + c0 + c) =
                mma::pack_bf16x2(beta0 * y[j][0], beta0 * y[j][1]);
          if (r1 < n)
            *reinterpret_cast<uint32_t*>(dv1 + c0 + c) =
                mma::pack_bf16x2(beta1 * y[j][2], beta1 * y[j][3]);
        }
      }
    }
    if (it + 2 < tiles) {
      __syncthreads();  // buffer buf no longer read
      load_tile(it + 2, buf);
      tile_commit();
    }
  }
  __syncthreads();  // the V tiles no longer read: N, E and the dk partial take their place
  if (!early_dkp) {
    tile_load_zfill(dk_part + row0 * K, K, n, R, K, s.dkp, ldp);
    tile_commit();
  }
  if (active) {
    // dTm_B's columns scaled by beta_c and masked to c <= r; N_B = dTm_B Tm^T (column blocks
    // jb <= mb; k blocks kb <= jb: Tm_jc = 0 for c > j) -> s.N.
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j) {
      if (j / 2 <= mb) {
        const int c = 8 * j + 2 * t;
        const float b0 = s.beta[c], b1 = s.beta[c + 1];
        dtm[j][0] = c <= r0 ? b0 * dtm[j][0] : 0.0f;
        dtm[j][1] = c + 1 <= r0 ? b1 * dtm[j][1] : 0.0f;
        dtm[j][2] = c <= r1 ? b0 * dtm[j][2] : 0.0f;
        dtm[j][3] = c + 1 <= r1 ? b1 * dtm[j][3] : 0.0f;
      }
    }
    float nacc[2 * NB][4];
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) nacc[j][e] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < NB; ++kb) {
      if (kb <= mb) {
        uint32_t a[4];
        tile::a_from_c(a, dtm, kb);
#pragma unroll
        for (int jb = kb; jb < NB; ++jb) {
          if (jb <= mb) {
            uint32_t b[4];
            tile::frag_b2(b, s.Tm, ldl, 16 * kb, 16 * jb, lane);
            tile::mma_x2(nacc[2 * jb], nacc[2 * jb + 1], a, b);
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j) {
      if (j / 2 <= mb) {
        const int c = 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(s.N + r0 * ldl + c) =
            mma::pack_bf16x2(nacc[j][0], nacc[j][1]);
        *reinterpret_cast<uint32_t*>(s.N + r1 * ldl + c) =
            mma::pack_bf16x2(nacc[j][2], nacc[j][3]);
      }
    }
  }
  __syncthreads();  // N written
  float ts0 = 0.0f, ts1 = 0.0f;  // row sums of t, rows r0, r1
  uint32_t ea[NB][4];            // E_B as A fragments (k blocks <= mb)
  if (active) {
    float da[2 * NB][4], gk[2 * NB][4];
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) da[j][e] = gk[j][e] = 0.0f;
    // (Tm^T N)_B: k blocks a >= mb, column blocks <= mb.
#pragma unroll
    for (int kb = 0; kb < NB; ++kb) {
      if (kb >= mb && kb < kb_end) {
        uint32_t a[4];
        tile::frag_a_trans(a, s.Tm, ldl, m0, 16 * kb, lane);
#pragma unroll
        for (int jb = 0; jb < NB; ++jb) {
          if (jb <= mb) {
            uint32_t b[4];
            tile::frag_b2_trans(b, s.N, ldl, 16 * kb, 16 * jb, lane);
            tile::mma_x2(da[2 * jb], da[2 * jb + 1], a, b);
          }
        }
      }
    }
    // G_B = (K K^T)_B, column blocks <= mb.
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
      uint32_t a[4];
      tile::frag_a(a, s.k, ldk, m0, k0, lane);
#pragma unroll
      for (int jb = 0; jb < NB; ++jb) {
        if (jb <= mb) {
          uint32_t b[4];
          tile::frag_b2(b, s.k, ldk, k0, 16 * jb, lane);
          tile::mma_x2(gk[2 * jb], gk[2 * jb + 1], a, b);
        }
      }
    }
    // t and E (j < r < n), in place of dA and G; ts and the column sums.
    const float gr0 = s.gam[r0], gr1 = s.gam[r1];
#pragma unroll
    for (int j = 0; j < 2 * NB; ++j) {
      float cs0 = 0.0f, cs1 = 0.0f;  // columns c, c + 1 of the lane's rows
      if (j / 2 <= mb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e < 2 ? r0 : r1, c = 8 * j + 2 * t + e % 2;
          float tv = 0.0f, ev = 0.0f;
          if (c < r && r < n) {
            const float D = exp_t<bf16_t>((e < 2 ? gr0 : gr1) - s.gam[c]), dA = -da[j][e];
            tv = dA * gk[j][e] * D;
            ev = dA * (e < 2 ? beta0 : beta1) * D;
          }
          da[j][e] = ev;
          if (e < 2) {
            ts0 += tv;
          } else {
            ts1 += tv;
          }
          const float bt = (e < 2 ? beta0 : beta1) * tv;
          if (e % 2 == 0) {
            cs0 += bt;
          } else {
            cs1 += bt;
          }
        }
        // Sum over the 8 row pairs of the warp (lanes g = 0..7, the same t).
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
          cs0 += __shfl_xor_sync(0xffffffffu, cs0, o);
          cs1 += __shfl_xor_sync(0xffffffffu, cs1, o);
        }
        if (g == 0) {
          const int c = 8 * j + 2 * t;
          s.csp[mb * R + c] = cs0;
          s.csp[mb * R + c + 1] = cs1;
        }
        const int c = 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(s.E + r0 * ldl + c) = mma::pack_bf16x2(da[j][0], da[j][1]);
        *reinterpret_cast<uint32_t*>(s.E + r1 * ldl + c) = mma::pack_bf16x2(da[j][2], da[j][3]);
      }
    }
#pragma unroll
    for (int kb = 0; kb < NB; ++kb) {
      tile::a_from_c(ea[kb], da, kb);
    }
  }
  tile_wait<0>();   // the dk partial
  __syncthreads();  // E, csp and the dk partial written
  if (active) {
    float kz0 = 0.0f, kz1 = 0.0f;  // the lane's parts of k_r . z_r
    const float be0 = beta0 * exp_t<bf16_t>(s.gam[r0]), be1 = beta1 * exp_t<bf16_t>(s.gam[r1]);
#pragma unroll
    for (int h0 = 0; h0 < K; h0 += KP) {
      float acc[KPT][4];
#pragma unroll
      for (int j = 0; j < KPT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
      // Z_B = (Tm^T dW)_B
#pragma unroll
      for (int kb = 0; kb < NB; ++kb) {
        if (kb >= mb && kb < kb_end) {
          uint32_t a[4];
          tile::frag_a_trans(a, s.Tm, ldl, m0, 16 * kb, lane);
#pragma unroll
          for (int jp = 0; jp < KPT / 2; ++jp) {
            uint32_t b[4];
            tile::frag_b2_trans(b, s.dW, ldk, 16 * kb, h0 + 16 * jp, lane);
            tile::mma_x2(acc[2 * jp], acc[2 * jp + 1], a, b);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < KPT; ++j) {
        const int c = h0 + 8 * j + 2 * t;
        const float2 k0v = load_bf16x2(s.k + r0 * ldk + c), k1v = load_bf16x2(s.k + r1 * ldk + c);
        kz0 += k0v.x * acc[j][0] + k0v.y * acc[j][1];
        kz1 += k1v.x * acc[j][2] + k1v.y * acc[j][3];
        acc[j][0] *= be0;
        acc[j][1] *= be0;
        acc[j][2] *= be1;
        acc[j][3] *= be1;
      }
      // + E_B K (k blocks <= mb: E is strictly lower) + (E^T K)_B (k blocks >= mb)
#pragma unroll
      for (int kb = 0; kb < NB; ++kb) {
        if (kb <= mb) {
#pragma unroll
          for (int jp = 0; jp < KPT / 2; ++jp) {
            uint32_t b[4];
            tile::frag_b2_trans(b, s.k, ldk, 16 * kb, h0 + 16 * jp, lane);
            tile::mma_x2(acc[2 * jp], acc[2 * jp + 1], ea[kb], b);
          }
        }
        if (kb >= mb && kb < kb_end) {
          uint32_t a[4];
          tile::frag_a_trans(a, s.E, ldl, m0, 16 * kb, lane);
#pragma unroll
          for (int jp = 0; jp < KPT / 2; ++jp) {
            uint32_t b[4];
            tile::frag_b2_trans(b, s.k, ldk, 16 * kb, h0 + 16 * jp, lane);
            tile::mma_x2(acc[2 * jp], acc[2 * jp + 1], a, b);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < KPT; ++j) {
        const int c = h0 + 8 * j + 2 * t;
        const float2 p0 = *reinterpret_cast<const float2*>(s.dkp + r0 * ldp + c);
        const float2 p1 = *reinterpret_cast<const float2*>(s.dkp + r1 * ldp + c);
        if (r0 < n)
          *reinterpret_cast<uint32_t*>(dk0 + c) = mma::pack_bf16x2(acc[j][0] + p0.x, acc[j][1] + p0.y);
        if (r1 < n)
          *reinterpret_cast<uint32_t*>(dk1 + c) = mma::pack_bf16x2(acc[j][2] + p1.x, acc[j][3] + p1.y);
      }
    }
    // The row sums over the lanes of a row (t = 0..3), then dbeta and dgam of rows r0, r1.
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      vy0 += __shfl_xor_sync(0xffffffffu, vy0, o);
      vy1 += __shfl_xor_sync(0xffffffffu, vy1, o);
      kz0 += __shfl_xor_sync(0xffffffffu, kz0, o);
      kz1 += __shfl_xor_sync(0xffffffffu, kz1, o);
      ts0 += __shfl_xor_sync(0xffffffffu, ts0, o);
      ts1 += __shfl_xor_sync(0xffffffffu, ts1, o);
    }
    if (t < 2) {
      const int r = t == 0 ? r0 : r1;
      const float w = exp_t<bf16_t>(s.gam[r]) * (t == 0 ? kz0 : kz1);
      const float ts = t == 0 ? ts0 : ts1, bt = t == 0 ? beta0 : beta1;
      float cs = 0.0f;
      for (int wb = mb; wb < kb_end; ++wb) cs += s.csp[wb * R + r];
      s.dbeta[r] = (t == 0 ? vy0 : vy1) + w + ts;
      s.dgam[r] = s.dgp[r] + bt * (w + ts) - cs;
    }
  }
  __syncthreads();  // dgam, dbeta written
  if (mb == 0) {
    // dg_r = sum_{m >= r} dgam_m: lane l holds rows 2l, 2l + 1 (R <= 64); the sum over the lanes
    // above l by a butterfly (the lower half of every group of 2 o lanes adds the upper half's
    // total), then the lane's own rows.
    const int ra = 2 * lane, rb = ra + 1;
    const float a = ra < n ? s.dgam[ra] : 0.0f, b = rb < n ? s.dgam[rb] : 0.0f;
    float above = 0.0f, total = a + b;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, total, o);
      if ((lane & o) == 0) above += other;
      total += other;
    }
    if (ra < n) {
      dg[x0 + ra * H] = above + b + a;
      dbeta[x0 + ra * H] = s.dbeta[ra];
    }
    if (rb < n) {
      dg[x0 + rb * H] = above + b;
      dbeta[x0 + rb * H] = s.dbeta[rb];
    }
  }
}

// Which bwd_qk runs at K 128 where the register passes apply (AMOR_GDN_QK_FORM, read once):
// "reg" gdn_bwd_qk_reg_kernel (a block per chunk); "stream" gdn_bwd_qk_stream_kernel (a block per
// SM streaming chunks) for the compiled shapes (K 128, V 256, chunk 64), reg otherwise. K 64 keeps
// reg either way. Default stream: it passed CudaParity.GatedDelta and GatedDeltaSmall* on the H200
// (session 8, also with AMOR_GDN_QK_BLOCKS=1 and 3, so blocks walk several chunks) and cut the
// backward at H16 K128 V256 B8 T2048 from 1777 to 1422 us (fwd+bwd 2486 -> 2130).
inline bool qk_form_stream() {
  static const bool on = env_choice("AMOR_GDN_QK_FORM", {"reg", "stream"}, "stream") == "stream";
  return on;
}
// The stream kernel's grid (AMOR_GDN_QK_BLOCKS, read once): 0 or unset one block per SM, else at
// most this many blocks (1 makes a single block walk every chunk: what the emulator checks).
inline int qk_stream_blocks() {
  static const int n = env_int("AMOR_GDN_QK_BLOCKS", 1, 1 << 20, 0);
  return n;
}

template <class T>
void backward_typed(const void* q, const void* k, const void* v, const void* g, const void* beta,
                    bool gate_f32, const void* s0, bool s0_f32, const void* dsf, bool dsf_f32,
                    float scale, const void* d_o, void* dq, void* dk, void* dv, float* dg,
                    float* dbeta, float* ds0, float* scratch, const float* saved, const Dims& d,
                    cudaStream_t stream) {
  // With `saved` (the forward's gam, W, Tm, S, Vn: gated_delta_cuda.h) nothing is recomputed;
  // else step 0 recomputes them into the scratch (launch_intermediates: the same bits).
  Carve kept{saved ? const_cast<float*>(saved) : scratch}, work{saved ? scratch : nullptr};
  const Scratch<T> sc(kept, saved ? work : kept, d, true, !saved, true);
  const T *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k);
  const T *vp = static_cast<const T*>(v), *dop = static_cast<const T*>(d_o);
  if (!saved) launch_intermediates(kp, vp, g, beta, gate_f32, s0, s0_f32, d, sc, nullptr, stream);

  const dim3 columns(unsigned((d.V + kVt - 1) / kVt), unsigned(d.H), unsigned(d.B));
  const dim3 chunks(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  bool reg = false;
  if constexpr (std::is_same_v<T, bf16_t>) {
    reg = reg_state_ok<T>(d, kp) && reinterpret_cast<uintptr_t>(qp) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(dop) % 16 == 0;
    if (reg) launch_state_bwd_wide(qp, kp, dop, dsf, dsf_f32, scale, d, sc, ds0, stream);
  }
  if (!reg) {
    allow_smem(gdn_state_bwd_kernel<T>);
    gdn_state_bwd_kernel<T><<<columns, kThreads, smem_bytes<StateBwdSmem<T>>(d), stream>>>(
        qp, kp, dop, sc.gam, sc.W, dsf, dsf_f32, scale, d, sc.dS, sc.dVn, ds0);
    AMOR_CUDA_CHECK_LAUNCH();
  }
  bool qk_reg = false;
  if constexpr (std::is_same_v<T, bf16_t>) {
    qk_reg = reg && d.K <= 128 && qk_variant_reg();
    auto launch_qk_reg = [&](auto ks, auto sh) {
      constexpr int KS = decltype(ks)::value;
      auto* kernel = gdn_bwd_qk_reg_kernel<KS, decltype(sh)>;
      allow_smem(kernel);
      kernel<<<chunks, kThreads * KS, smem_bytes<BwdQkRegSmem<T>>(d), stream>>>(
          qp, kp, dop, sc.gam, sc.Vn, sc.dVn, sc.S, sc.dS, scale, d, static_cast<T*>(dq), sc.dk,
          sc.dgam, sc.dW);
      AMOR_CUDA_CHECK_LAUNCH();
    };
    if (qk_reg && d.K <= 64)
      with_shape<T, 64>(d, [&](auto sh) { launch_qk_reg(std::integral_constant<int, 1>{}, sh); });
    else if (qk_reg)
      with_shape<T, 128>(d, [&](auto sh) {
        using Sh = decltype(sh);
        if constexpr (!std::is_same_v<Sh, AnyShape>) {
          if (qk_form_stream()) {
            auto* kernel = gdn_bwd_qk_stream_kernel<Sh>;
            allow_smem(kernel);
            const int64_t chunks = d.B * d.H * d.NC;
            const int cap = qk_stream_blocks();
            const int64_t grid = std::min<int64_t>(chunks, cap > 0 ? cap : num_sms());
            kernel<<<unsigned(grid), kThreads * 2, QkStreamLayout(d).bytes(), stream>>>(
                qp, kp, dop, sc.gam, sc.Vn, sc.dVn, sc.S, sc.dS, scale, d, static_cast<T*>(dq),
                sc.dk, sc.dgam, sc.dW);
            AMOR_CUDA_CHECK_LAUNCH();
            return;
          }
        }
        launch_qk_reg(std::integral_constant<int, 2>{}, sh);
      });
  }
  if (!qk_reg) {
    allow_smem(gdn_bwd_qk_kernel<T>);
    gdn_bwd_qk_kernel<T><<<chunks, kThreads, smem_bytes<BwdQkSmem<T>>(d), stream>>>(
        qp, kp, dop, sc.gam, sc.Vn, sc.dVn, sc.S, sc.dS, scale, d, static_cast<T*>(dq), sc.dk,
        sc.dgam, sc.dW);
    AMOR_CUDA_CHECK_LAUNCH();
  }
  bool wy_reg = false;
  if constexpr (std::is_same_v<T, bf16_t>) {
    wy_reg = reg && wy_variant_reg() && d.L % 16 == 0 &&
             reinterpret_cast<uintptr_t>(vp) % 16 == 0;
    auto launch_wy_reg = [&](auto kk) {
      constexpr int KK = decltype(kk)::value;
      with_shape<T, KK>(d, [&](auto sh) {
        auto* kernel = gdn_bwd_wy_reg_kernel<KK, decltype(sh)>;
        allow_smem(kernel);
        kernel<<<chunks, kWyWarps * 32, smem_bytes<BwdWyRegSmem<T>>(d), stream>>>(
            kp, vp, beta, gate_f32, sc.gam, sc.Tm, sc.dVn, sc.dW, sc.dk, sc.dgam, d,
            static_cast<T*>(dk), static_cast<T*>(dv), dg, dbeta);
        AMOR_CUDA_CHECK_LAUNCH();
      });
    };
    if (wy_reg) {
      switch (d.K) {
        case 32:
          launch_wy_reg(std::integral_constant<int, 32>{});
          break;
        case 48:
          launch_wy_reg(std::integral_constant<int, 48>{});
          break;
        case 64:
          launch_wy_reg(std::integral_constant<int, 64>{});
          break;
        default:
          launch_wy_reg(std::integral_constant<int, 128>{});
      }
    }
  }
  if (!wy_reg) {
    with_shape<T>(d, [&](auto sh) {
      auto* kernel = gdn_bwd_wy_kernel<T, decltype(sh)>;
      allow_smem(kernel);
      kernel<<<chunks, kThreads, smem_bytes<BwdWySmem<T>>(d), stream>>>(
          kp, vp, beta, gate_f32, sc.gam, sc.Tm, sc.dVn, sc.dW, sc.dk, sc.dgam, d,
          static_cast<T*>(dk), static_cast<T*>(dv), dg, dbeta);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
}

}  // namespace
}  // namespace gdn

void gated_delta_backward(DType t, const void* q, const void* k, const void* v, const void* g,
                          const void* beta, bool gate_f32, const void* s0, bool s0_f32,
                          const void* dsf, bool dsf_f32, float scale, const void* d_o, void* dq,
                          void* dk, void* dv, float* dg, float* dbeta, float* ds0, float* scratch,
                          const GdnShape& s, cudaStream_t stream, const float* saved) {
  const gdn::Dims d = gdn::dims_of(s);
  if (t == DType::F32)
    gdn::backward_typed<float>(q, k, v, g, beta, gate_f32, s0, s0_f32, dsf, dsf_f32, scale, d_o, dq,
                               dk, dv, dg, dbeta, ds0, scratch, saved, d, stream);
  else
    gdn::backward_typed<bf16_t>(q, k, v, g, beta, gate_f32, s0, s0_f32, dsf, dsf_f32, scale, d_o,
                                dq, dk, dv, dg, dbeta, ds0, scratch, saved, d, stream);
}

}  // namespace amor::cuda
