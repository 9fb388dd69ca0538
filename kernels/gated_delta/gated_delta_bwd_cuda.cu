// Gated delta rule backward on the GPU: the chunked backward of gated_delta_chunked_ref.h (its
// comment lists every term), cut into kernels the way flash-linear-attention structures
// chunk_gated_delta_rule_bwd. With the forward's notation (gated_delta_fwd_cuda.cu):
//  0. recompute: gdn_prepare_kernel (gam, W, U and now Tm) and gdn_state_fwd_kernel (every
//     chunk's start state S and Vn = U - W S), exactly the forward's kernels.
//  1. gdn_state_bwd_kernel, one block per (32 columns of V, head, batch), chunks in reverse:
//     carries dS (the gradient of the chunk's end state, d_final_state for the last chunk), stores
//     it per chunk ([BH,NC,K,V] f32), and computes
//        dVn_j = sum_{r>=j} P_rj dO_r + D_{n-1,j} dS^T k_j        -> scratch [BH,T,V]
//        dS   <- e_{n-1} dS + scale sum_r e_r q_r dO_r^T - sum_r W_r dVn_r^T
//     Columns of dS are independent as in the forward's state pass; dS after chunk 0 is
//     d_initial_state.
//  2. gdn_bwd_qk_kernel, one block per (chunk, head, batch), chunks in parallel: the terms of
//     O = scale diag(e) Q S + P Vn and S' = e S + Kh^T Vn and Vn = U - W S, reduced over V in
//     32-column tiles: dP = dO Vn^T, dqS = dO S^T, dKh = Vn dS'^T, dW = -dVn S^T, <dS', S>. Gives
//     dq (final), dk and dgam partials and dW (f32 scratch).
//  3. gdn_bwd_wy_kernel, one block per (chunk, head, batch): the WY/UT terms. dTm = (dVn V^T +
//     dW K^T diag(e)) diag(beta) (lower), dv = diag(beta) Tm^T dVn, z = Tm^T dW, dA = -Tm^T dTm
//     Tm^T (strictly lower), then dk, dbeta, dgam from W, U and A, and dg as the reverse
//     cumulative sum of dgam inside the chunk.
// Every tile is f32 in shared memory; the products go through block_mm_t<T> (gated_delta_tc.cuh:
// tensor cores, bf16 operands and f32 accumulation for bf16 inputs; exact SIMT f32 for f32
// inputs); pass 1's two products are each one product over a concatenated k ([P^T | diag(dec) K]
// [dO; dS] and [scale diag(e) Q | -W]^T [dO; dVn]). The only sequential work is pass 1 (and the
// recomputed forward state pass): NC steps per head.
// Memory traffic beyond the forward's: the f32 scratch Tm [BH,T,L], dS per chunk (K*V f32),
// dVn, dW and the partials; each written once and read once or twice.
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda {
namespace gdn {
namespace {

template <class T>
__global__ void __launch_bounds__(kThreads)
    gdn_state_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ dO,
                         const float* __restrict__ gam, const float* __restrict__ W,
                         const void* dsf, bool state_f32, float scale, Dims d,
                         float* __restrict__ dS_out, float* __restrict__ dVn_out,
                         float* __restrict__ ds0) {
  extern __shared__ float smem[];
  Carve carve{smem};
  StateBwdSmem s(carve, d);
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, K = d.K, V = d.V;
  const int64_t KP = K + 1;  // padded row stride of the q and k tiles (column reads conflict-free)
  const int64_t c0 = int64_t(blockIdx.x) * kVt, KV = K * V;
  const int w = int(V - c0 < kVt ? V - c0 : kVt), L = d.L;

  for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
    const int i = idx / w, c = idx % w;
    s.dS[i * kVs + c] = dsf ? load_any(dsf, bh * KV + i * V + c0 + c, state_f32) : 0.0f;
  }
  for (int64_t ch = d.NC - 1; ch >= 0; --ch) {
    const int64_t t0 = ch * d.L, row0 = bh * d.T + t0;
    const int n = int(d.T - t0 < d.L ? d.T - t0 : d.L);
    __syncthreads();  // dS complete; the previous chunk's tiles no longer read
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      dS_out[(bh * d.NC + ch) * KV + i * V + c0 + c] = s.dS[i * kVs + c];
    }
    load_rows(q, d, b, h, t0, n, K, 0, int(K), s.q, KP);
    load_rows(k, d, b, h, t0, n, K, 0, int(K), s.k, KP);
    load_rows(dO, d, b, h, t0, n, V, c0, w, s.dO, kVs);
    load_scratch(W, row0, n, K, 0, int(K), s.W, K);
    for (int r = threadIdx.x; r < n; r += blockDim.x) s.gam[r] = gam[row0 + r];
    __syncthreads();
    const float glast = s.gam[n - 1], elast = expf(glast);
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
      s.e[r] = expf(s.gam[r]);
      s.dec[r] = expf(glast - s.gam[r]);
    }
    block_mm_t<T>(
        n, n, int(K), [&](int r, int i) { return s.q[r * KP + i]; },
        [&](int i, int j) { return s.k[j * KP + i]; },
        [&](int r, int j, float qk) {
          s.P[r * L + j] = j <= r ? scale * qk * expf(s.gam[r] - s.gam[j]) : 0.0f;
        });
    __syncthreads();
    // dVn_j = sum_{r>=j} P_rj dO_r + D_{n-1,j} dS^T k_j
    // One product over the concatenated k = (the rows r, then K): [P^T | diag(dec) K] [dO; dS]
    // (P is zero above the diagonal, so the r < j terms vanish).
    block_mm_t<T>(
        n, w, n + int(K),
        [&](int j, int kk) {
          return kk < n ? s.P[kk * L + j] : s.dec[j] * s.k[j * KP + (kk - n)];
        },
        [&](int kk, int c) { return kk < n ? s.dO[kk * kVs + c] : s.dS[(kk - n) * kVs + c]; },
        [&](int j, int c, float dvn) {
          s.dVn[j * kVs + c] = dvn;
          dVn_out[(row0 + j) * V + c0 + c] = dvn;
        });
    __syncthreads();
    // dS <- e_{n-1} dS + scale sum_r e_r q_r dO_r^T - sum_r W_r dVn_r^T, as one product
    // [scale diag(e) Q | -W]^T [dO; dVn] over k = (the rows, twice); each dS element is read and
    // written by the thread that owns it.
    block_mm_t<T>(
        int(K), w, 2 * n,
        [&](int i, int kk) {
          return kk < n ? scale * s.e[kk] * s.q[kk * KP + i] : -s.W[(kk - n) * K + i];
        },
        [&](int kk, int c) { return kk < n ? s.dO[kk * kVs + c] : s.dVn[(kk - n) * kVs + c]; },
        [&](int i, int c, float x) { s.dS[i * kVs + c] = elast * s.dS[i * kVs + c] + x; });
  }
  __syncthreads();
  if (ds0) {
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      ds0[bh * KV + i * V + c0 + c] = s.dS[i * kVs + c];
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    gdn_bwd_qk_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ dO,
                      const float* __restrict__ gam, const float* __restrict__ Vn,
                      const float* __restrict__ dVn, const float* __restrict__ S_in,
                      const float* __restrict__ dS_in, float scale, Dims d, T* __restrict__ dq,
                      float* __restrict__ dk_part, float* __restrict__ dgam_part,
                      float* __restrict__ dW_out) {
  extern __shared__ float smem[];
  Carve carve{smem};
  BwdQkSmem s(carve, d);
  const ChunkPos p = chunk_pos(d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0, KP = K + 1;
  const float* S = S_in + (p.bh * d.NC + p.c) * K * V;
  const float* dS = dS_in + (p.bh * d.NC + p.c) * K * V;

  load_rows(q, d, p.b, p.h, p.t0, n, K, 0, int(K), s.q, KP);
  load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, KP);
  for (int r = threadIdx.x; r < n; r += blockDim.x) s.gam[r] = gam[row0 + r];
  for (int idx = threadIdx.x; idx < L * L; idx += blockDim.x) s.dP[idx] = 0.0f;
  for (int idx = threadIdx.x; idx < L * K; idx += blockDim.x)
    s.dqS[idx] = s.dKh[idx] = s.dW[idx] = 0.0f;
  float sd = 0.0f;  // this thread's part of <dS', S>
  for (int64_t c0 = 0; c0 < V; c0 += kVt) {
    const int w = int(V - c0 < kVt ? V - c0 : kVt);
    __syncthreads();  // accumulators zeroed; the previous tile no longer read
    load_rows(dO, d, p.b, p.h, p.t0, n, V, c0, w, s.dO, kVtPad);
    load_scratch(Vn, row0, n, V, c0, w, s.Vn, kVtPad);
    load_scratch(dVn, row0, n, V, c0, w, s.dVn, kVtPad);
    load_scratch(S, 0, int(K), V, c0, w, s.S, kVtPad);
    load_scratch(dS, 0, int(K), V, c0, w, s.dS, kVtPad);
    __syncthreads();
    // The V reductions, tile by tile (each accumulator element stays with one thread).
    block_mm_t<T>(
        n, n, w, [&](int r, int c) { return s.dO[r * kVtPad + c]; },
        [&](int c, int j) { return s.Vn[j * kVtPad + c]; },
        [&](int r, int j, float x) { s.dP[r * L + j] += x; });
    block_mm_t<T>(
        n, int(K), w, [&](int r, int c) { return s.dO[r * kVtPad + c]; },
        [&](int c, int i) { return s.S[i * kVtPad + c]; },
        [&](int r, int i, float x) { s.dqS[r * K + i] += x; });
    block_mm_t<T>(
        n, int(K), w, [&](int j, int c) { return s.Vn[j * kVtPad + c]; },
        [&](int c, int i) { return s.dS[i * kVtPad + c]; },
        [&](int j, int i, float x) { s.dKh[j * K + i] += x; });
    block_mm_t<T>(
        n, int(K), w, [&](int r, int c) { return s.dVn[r * kVtPad + c]; },
        [&](int c, int i) { return s.S[i * kVtPad + c]; },
        [&](int r, int i, float x) { s.dW[r * K + i] -= x; });
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      sd += s.dS[i * kVtPad + c] * s.S[i * kVtPad + c];
    }
  }
  __syncthreads();
  sd = block_sum(sd, s.red);
  // P_rj = scale (q_r.k_j) D_rj; keep dP_rj P_rj in P and dP_rj D_rj in dP (j <= r, else 0).
  block_mm_t<T>(
      n, n, int(K), [&](int r, int i) { return s.q[r * KP + i]; },
      [&](int i, int j) { return s.k[j * KP + i]; },
      [&](int r, int j, float qk) {
        const float D = j <= r ? expf(s.gam[r] - s.gam[j]) : 0.0f, dp = s.dP[r * L + j];
        s.P[r * L + j] = dp * scale * qk * D;
        s.dP[r * L + j] = dp * D;
      });
  __syncthreads();
  const float glast = s.gam[n - 1];
  // dq_r = scale (e_r S dO_r + sum_{j<=r} dP_rj D_rj k_j)
  block_mm_t<T, Tri::kLower>(
      n, int(K), n, [&](int r, int j) { return s.dP[r * L + j]; },
      [&](int j, int i) { return s.k[j * KP + i]; },
      [&](int r, int i, float x) {
        dq[((p.b * d.T + p.t0 + r) * d.H + p.h) * K + i] =
            from_f32<T>(scale * (expf(s.gam[r]) * s.dqS[r * K + i] + x));
      });
  // dk_j (partial) = scale sum_{r>=j} dP_rj D_rj q_r + D_{n-1,j} dKh_j; dW to the scratch.
  block_mm_t<T, Tri::kUpper>(
      n, int(K), n, [&](int j, int r) { return s.dP[r * L + j]; },
      [&](int r, int i) { return s.q[r * KP + i]; },
      [&](int j, int i, float x) {
        dk_part[(row0 + j) * K + i] = scale * x + expf(glast - s.gam[j]) * s.dKh[j * K + i];
        dW_out[(row0 + j) * K + i] = s.dW[j * K + i];
      });
  // The row reductions, one warp per row with the lanes along the row (a thread per row would read
  // a column of these [*, 64] tiles, one bank 32 times): x_j = D_{n-1,j} k_j . dKh_j and
  // rp_r = scale e_r q_r.(S dO_r) + sum_j dP_rj P_rj.
  {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int r = int(threadIdx.x) / 32; r < n; r += nw) {  // warp-uniform (warp_sum)
      float kd = 0.0f, qd = 0.0f, ps = 0.0f;
      for (int i = lane; i < K; i += 32) {
        kd += s.k[r * KP + i] * s.dKh[r * K + i];
        qd += s.q[r * KP + i] * s.dqS[r * K + i];
      }
      for (int j = lane; j < n; j += 32) ps += s.P[r * L + j];
      kd = warp_sum(kd);
      qd = warp_sum(qd);
      ps = warp_sum(ps);
      if (lane == 0) {
        s.x[r] = expf(glast - s.gam[r]) * kd;
        s.rp[r] = scale * expf(s.gam[r]) * qd + ps;
      }
    }
  }
  __syncthreads();
  // dgam_r (partial) = scale e_r q_r.(S dO_r) + sum_j dP_rj P_rj - sum_r' dP_r'r P_r'r - x_r
  //                    (+ e_{n-1} <dS', S> + sum_j x_j for the last row); the column sum by a
  //                    thread per column (consecutive threads, consecutive banks).
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float a = s.rp[r] - s.x[r];
    for (int j = 0; j < n; ++j) a -= s.P[j * L + r];
    if (r == n - 1) {
      a += expf(glast) * sd;
      for (int j = 0; j < n; ++j) a += s.x[j];
    }
    dgam_part[row0 + r] = a;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    gdn_bwd_wy_kernel(const T* __restrict__ k, const T* __restrict__ v, const void* beta,
                      bool gate_f32, const float* __restrict__ gam, const float* __restrict__ Tm,
                      const float* __restrict__ dVn, const float* __restrict__ dW,
                      const float* __restrict__ dk_part, const float* __restrict__ dgam_part,
                      Dims d, T* __restrict__ dk, T* __restrict__ dv, float* __restrict__ dg,
                      float* __restrict__ dbeta) {
  extern __shared__ float smem[];
  Carve carve{smem};
  BwdWySmem s(carve, d);
  const ChunkPos p = chunk_pos(d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0, KP = K + 1;
  auto tok = [&](int r) { return (p.b * d.T + p.t0 + r) * d.H + p.h; };

  load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, KP);
  load_scratch(dW, row0, n, K, 0, int(K), s.dW, K);
  load_scratch(Tm, row0, n, L, 0, L, s.Tm, L);
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    s.gam[r] = gam[row0 + r];
    s.beta[r] = load_any(beta, tok(r), gate_f32);
    s.dgam[r] = dgam_part[row0 + r];
    s.dbeta[r] = 0.0f;
  }
  __syncthreads();
  // dTm_rj = beta_j e_j (dW_r . k_j) for j <= r; the V part joins tile by tile below.
  block_mm_t<T>(
      n, n, int(K), [&](int r, int i) { return s.dW[r * K + i]; },
      [&](int i, int j) { return s.k[j * KP + i]; },
      [&](int r, int j, float x) {
        s.dTm[r * L + j] = j <= r ? s.beta[j] * expf(s.gam[j]) * x : 0.0f;
      });
  for (int64_t c0 = 0; c0 < V; c0 += kVt) {
    const int w = int(V - c0 < kVt ? V - c0 : kVt);
    __syncthreads();  // the previous tile no longer read
    load_rows(v, d, p.b, p.h, p.t0, n, V, c0, w, s.v, kVtPad);
    load_scratch(dVn, row0, n, V, c0, w, s.dVn, kVtPad);
    __syncthreads();
    // dTm_rj += beta_j (dVn_r . v_j)
    block_mm_t<T>(
        n, n, w, [&](int r, int c) { return s.dVn[r * kVtPad + c]; },
        [&](int c, int j) { return s.v[j * kVtPad + c]; },
        [&](int r, int j, float x) {
          if (j <= r) s.dTm[r * L + j] += s.beta[j] * x;
        });
    // y_j = sum_{r>=j} Tm_rj dVn_r;  dv_j = beta_j y_j
    block_mm_t<T, Tri::kUpper>(
        n, w, n, [&](int j, int r) { return s.Tm[r * L + j]; },
        [&](int r, int c) { return s.dVn[r * kVtPad + c]; },
        [&](int j, int c, float y) {
          s.y[j * kVtPad + c] = y;
          dv[tok(j) * V + c0 + c] = from_f32<T>(s.beta[j] * y);
        });
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) {  // dbeta_j += v_j . y_j
      float vy = 0.0f;
      for (int c = 0; c < w; ++c) vy += s.v[j * kVtPad + c] * s.y[j * kVtPad + c];
      s.dbeta[j] += vy;
    }
  }
  __syncthreads();
  // z_j = sum_{r>=j} Tm_rj dW_r (into the V tiles' place, no longer read);  M = Tm^T dTm
  block_mm_t<T, Tri::kUpper>(
      n, int(K), n, [&](int j, int r) { return s.Tm[r * L + j]; },
      [&](int r, int i) { return s.dW[r * K + i]; },
      [&](int j, int i, float z) { s.z[j * K + i] = z; });
  block_mm_t<T, Tri::kUpper>(
      n, n, n, [&](int r, int a) { return s.Tm[a * L + r]; },
      [&](int a, int c) { return s.dTm[a * L + c]; },
      [&](int r, int c, float m) { s.M[r * L + c] = m; });
  __syncthreads();
  // w_j = e_j (k_j . z_j): dbeta_j += w_j, dgam_j += beta_j w_j (a warp per row, lanes along it)
  {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int j = int(threadIdx.x) / 32; j < n; j += nw) {  // warp-uniform (warp_sum)
      float kz = 0.0f;
      for (int i = lane; i < K; i += 32) kz += s.k[j * KP + i] * s.z[j * K + i];
      kz = warp_sum(kz);
      if (lane == 0) {
        const float wj = expf(s.gam[j]) * kz;
        s.dbeta[j] += wj;
        s.dgam[j] += s.beta[j] * wj;
      }
    }
  }
  // dA = -(Tm^T dTm) Tm^T, strictly lower, into dTm (no longer read).
  block_mm_t<T>(
      n, n, n, [&](int r, int c) { return s.M[r * L + c]; },
      [&](int c, int j) { return s.Tm[j * L + c]; },
      [&](int r, int j, float x) { s.dTm[r * L + j] = j < r ? -x : 0.0f; });
  __syncthreads();
  // The Gram matrix G_rj = k_r . k_j, into M (no longer read).
  block_mm_t<T>(
      n, n, int(K), [&](int r, int i) { return s.k[r * KP + i]; },
      [&](int i, int j) { return s.k[j * KP + i]; },
      [&](int r, int j, float x) { s.M[r * L + j] = x; });
  __syncthreads();
  // A_rj = beta_r G_rj D_rj: with t_rj = dA_rj G_rj D_rj (j < r),
  //   dbeta_r += sum_j t_rj,   dgam_r += beta_r sum_j t_rj - sum_{r'>r} beta_r' t_r'r,
  // and dk_r += sum_j (E_rj + E_jr) k_j with E_rj = dA_rj beta_r D_rj. One elementwise pass puts t
  // into M (the Gram matrix, not read after) and E into dTm (in place), zero for j >= r.
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int r = idx / n, j = idx % n;
    if (j < r) {
      const float D = expf(s.gam[r] - s.gam[j]), dA = s.dTm[r * L + j];
      s.M[r * L + j] *= dA * D;
      s.dTm[r * L + j] = dA * s.beta[r] * D;
    } else {
      s.M[r * L + j] = 0.0f;
    }
  }
  __syncthreads();
  // Row sums of t: one warp per row, lanes along the row (a thread per row would hit one bank).
  {
    const int lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
    for (int r = int(threadIdx.x) / 32; r < n; r += nw) {  // warp-uniform (warp_sum)
      float ts = 0.0f;
      for (int j = lane; j < n; j += 32) ts += s.M[r * L + j];
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
    for (int r2 = r + 1; r2 < n; ++r2) cs += s.beta[r2] * s.M[r2 * L + r];
    s.dgam[r] -= cs;
  }
  __syncthreads();
  block_mm_t<T>(
      n, int(K), n, [&](int r, int j) { return s.dTm[r * L + j] + s.dTm[j * L + r]; },
      [&](int j, int i) { return s.k[j * KP + i]; },
      [&](int r, int i, float x) {
        dk[tok(r) * K + i] = from_f32<T>(dk_part[(row0 + r) * K + i] +
                                         s.beta[r] * expf(s.gam[r]) * s.z[r * K + i] + x);
      });
  // dg = reverse cumulative sum of dgam inside the chunk: row r sums dgam_{n-1} .. dgam_r in that
  // order (the sequential sum's rounding), all rows at once; dbeta.
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float rev = 0.0f;
    for (int m = n - 1; m >= r; --m) rev += s.dgam[m];
    dg[tok(r)] = rev;
    dbeta[tok(r)] = s.dbeta[r];
  }
}

template <class T>
void backward_typed(const void* q, const void* k, const void* v, const void* g, const void* beta,
                    bool gate_f32, const void* s0, bool s0_f32, const void* dsf, bool dsf_f32,
                    float scale, const void* d_o, void* dq, void* dk, void* dv, float* dg,
                    float* dbeta, float* ds0, float* scratch, const Dims& d, cudaStream_t stream) {
  Carve c{scratch};
  const Scratch sc(c, d, true);
  const T *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k);
  const T *vp = static_cast<const T*>(v), *dop = static_cast<const T*>(d_o);
  launch_prepare(storage_dtype<T>, k, v, g, beta, gate_f32, d, sc, stream);
  launch_state_fwd(storage_dtype<T>, k, s0, s0_f32, d, sc, nullptr, stream);

  const dim3 columns(unsigned((d.V + kVt - 1) / kVt), unsigned(d.H), unsigned(d.B));
  const dim3 chunks(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  allow_smem(gdn_state_bwd_kernel<T>);
  gdn_state_bwd_kernel<T><<<columns, kThreads, smem_bytes<StateBwdSmem>(d), stream>>>(
      qp, kp, dop, sc.gam, sc.W, dsf, dsf_f32, scale, d, sc.dS, sc.dVn, ds0);
  AMOR_CUDA_CHECK_LAUNCH();
  allow_smem(gdn_bwd_qk_kernel<T>);
  gdn_bwd_qk_kernel<T><<<chunks, kThreads, smem_bytes<BwdQkSmem>(d), stream>>>(
      qp, kp, dop, sc.gam, sc.Vn, sc.dVn, sc.S, sc.dS, scale, d, static_cast<T*>(dq), sc.dk,
      sc.dgam, sc.dW);
  AMOR_CUDA_CHECK_LAUNCH();
  allow_smem(gdn_bwd_wy_kernel<T>);
  gdn_bwd_wy_kernel<T><<<chunks, kThreads, smem_bytes<BwdWySmem>(d), stream>>>(
      kp, vp, beta, gate_f32, sc.gam, sc.Tm, sc.dVn, sc.dW, sc.dk, sc.dgam, d, static_cast<T*>(dk),
      static_cast<T*>(dv), dg, dbeta);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace gdn

void gated_delta_backward(DType t, const void* q, const void* k, const void* v, const void* g,
                          const void* beta, bool gate_f32, const void* s0, bool s0_f32,
                          const void* dsf, bool dsf_f32, float scale, const void* d_o, void* dq,
                          void* dk, void* dv, float* dg, float* dbeta, float* ds0, float* scratch,
                          const GdnShape& s, cudaStream_t stream) {
  const gdn::Dims d = gdn::dims_of(s);
  if (t == DType::F32)
    gdn::backward_typed<float>(q, k, v, g, beta, gate_f32, s0, s0_f32, dsf, dsf_f32, scale, d_o, dq,
                               dk, dv, dg, dbeta, ds0, scratch, d, stream);
  else
    gdn::backward_typed<bf16_t>(q, k, v, g, beta, gate_f32, s0, s0_f32, dsf, dsf_f32, scale, d_o,
                                dq, dk, dv, dg, dbeta, ds0, scratch, d, stream);
}

}  // namespace amor::cuda
