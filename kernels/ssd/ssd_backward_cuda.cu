// Mamba2 SSD scan on the GPU, backward (the math and notation of ssd_chunked_ref.h). In order:
//
//   rerun    cum, chunk states, states S_c entering each chunk      (ssd_forward_cuda.cu);
//            skipped where the forward kept them (`saved`, ssd_cuda.h)
//   (3')     dS_c = sum_i exp(cum_i) dy_i C_i^T                     one block per chunk
//   (2')     G_{nc} = dL/dfinal, G_c = exp(cum_last) G_{c+1} + dS_c  one thread per (b,h,p,n);
//            in place, so slot c ends up holding G_{c+1} (the gradient of chunk c's end state);
//            dh0 = G_0
//   dx       per chunk, with K_ij = C_i.B_j, E_ij = exp(cum_i - cum_j), dM_ij = dy_i.x_j (j <= i),
//            w_j = exp(cum_last - cum_j) dt_j, G = G_{c+1}:
//              dx_j   = D dy_j + dt_j sum_i K_ij E_ij dy_i + w_j G B_j
//              ddt_j  = sum_i dM_ij K_ij E_ij + exp(cum_last - cum_j) x_j.(G B_j)     (partial)
//              dcum_i = sum_j T_ij dt_j - dt_i sum_k T_ki - w_i x_i.(G B_i)   with T = dM K E,
//                       and at the last step + sum_j w_j x_j.(G B_j) + exp(cum_last) <G, S_c>
//              dD partial = sum_i dy_i.x_i
//   dB, dC   per chunk and head (summed over a group's heads afterwards):
//              dC_i = sum_j dM_ij E_ij dt_j B_j + exp(cum_i) S_c^T dy_i
//              dB_j = sum_i dM_ij E_ij dt_j C_i + w_j G^T x_j
//              dcum_i += C_i . (exp(cum_i) S_c^T dy_i)
//   finish   per chunk: da_k = sum_{i >= k} dcum_i, ddt_k += A da_k, dA partial += dt_k da_k;
//            dA, dD = fixed-order column sums of the per-chunk partials.
//
// The per-chunk kernels tile as the forward's (256 threads per (b, h, chunk); rows of x, dy [Q,P]
// and B, C [Q,N] as f32 in shared memory; 4x4 register tiles). Each output element has one
// writer per kernel and the kernels run in order, so no atomics: the result has the same bits on
// every run. bf16 storage: the dx and dB/dC kernels and the chunk outer products run on tensor
// cores (ssd_backward_tc_cuda.cu, ssd_forward_tc_cuda.cu). Memory: besides the forward's, the
// f32 state gradients [B,H,nc,P,N] (written by (3'), rewritten by (2'), read by dx and dB) and
// the per-head dB, dC [B,T,H,N] in f32 (written once, read once by the sum over heads).
// bf16 by spans (backward_spans, the default where the forward runs by spans): the states S_c
// and gradients G_{c+1} come from span passes (ssd_state_tc_cuda.cu) as bf16 per chunk (S_c
// instead from the forward's `saved`, where its chunk scan kept them), written
// once and read by the dx and dB/dC kernels (2 P N bytes per chunk each instead of the f32
// rewrites above), and dB, dC are summed over splits of 8 heads inside the dB/dC blocks
// (dbc_heads_tc_kernel: f32 partials per split, G * ceil(H / G / 8) per token instead of H
// per-head rows; per-head bf16 rows where a chunk's dB tile does not fit the registers).
#include <type_traits>

#include "kernels/ssd/ssd_mma.cuh"
#include "kernels/ssd/ssd_tile.cuh"

namespace amor::cuda {
namespace ssd {
namespace {

// (2') One thread per (b, h, p, n), from the last chunk to the first.
__global__ void state_grad_passing_kernel(Dims k, const float* __restrict__ cum,
                                          const float* __restrict__ dhT, float* __restrict__ grads,
                                          float* __restrict__ dh0) {
  const int64_t PN = k.P * k.N;
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= PN) return;
  const int64_t bh = blockIdx.y;
  float g = dhT ? dhT[bh * PN + e] : 0.0f;
  float* gr = grads + bh * k.nc * PN + e;
  constexpr int kAhead = 8;  // chunks whose loads are in flight together (as state passing)
  for (int64_t c0 = k.nc - 1; c0 >= 0; c0 -= kAhead) {
    float ds[kAhead], decay[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c = c0 - u;
      if (c >= 0) {
        const int64_t last = (c + 1) * k.Q < k.T ? (c + 1) * k.Q - 1 : k.T - 1;
        ds[u] = gr[c * PN];
        decay[u] = expf(cum[bh * k.T + last]);
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c = c0 - u;
      if (c >= 0) {
        gr[c * PN] = g;
        g = decay[u] * g + ds[u];
      }
    }
  }
  if (dh0) dh0[bh * PN + e] = g;
}

// dx, the partial ddt and dcum, the dD partial of one chunk. Shared memory: CG [max(Q,P)][N+1]
// (C rows, then G as [P][N+1]), Bs [Q][N+1], xs, dys, GB [Q][P+1], KE, Tm [Q][Q+1] (K E and
// dM K E, masked to j <= i), then per-step vectors.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dx_kernel(Dims k, const T* __restrict__ x, const float* __restrict__ dt,
              const T* __restrict__ Bm, const T* __restrict__ Cm, const float* __restrict__ D,
              const T* __restrict__ dy, const float* __restrict__ cum,
              const float* __restrict__ states, const float* __restrict__ grads,
              T* __restrict__ dx, float* __restrict__ ddt, float* __restrict__ dcum,
              float* __restrict__ partials) {
  extern __shared__ float smem[];
  __shared__ float red[32];
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int QP = Q > P ? Q : P;
  float* CG = smem;
  float* Bs = CG + QP * (N + 1);
  float* xs = Bs + Q * (N + 1);
  float* dys = xs + Q * (P + 1);
  float* GB = dys + Q * (P + 1);
  float* KE = GB + Q * (P + 1);
  float* Tm = KE + Q * (Q + 1);
  float* cm = Tm + Q * (Q + 1);
  float* dts = cm + Q;
  float* wv = dts + Q;
  float* wdw = wv + Q;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  load_rows(CG, Cm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N);
  load_rows(Bs, Bm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N);
  load_rows(xs, x, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P);
  load_rows(dys, dy, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P);
  __syncthreads();
  for (int j = threadIdx.x; j < L; j += blockDim.x) wv[j] = expf(cm[L - 1] - cm[j]) * dts[j];
  // KE = K E and Tm = dM K E on j <= i.
  for_tiles(L, L, [&](Tile& tile) {
    Tile dm = tile;
    tile.mac(SMat{CG, N + 1, 1}, SMat{Bs, 1, N + 1}, N);
    dm.mac(SMat{dys, P + 1, 1}, SMat{xs, 1, P + 1}, P);
#pragma unroll
    for (int a = 0; a < kTM; ++a)
#pragma unroll
      for (int b = 0; b < kTN; ++b) {
        const int i = tile.row(a), j = tile.col(b);
        if (i < L && j < L) {
          const float ke = j <= i ? tile.acc[a][b] * expf(cm[i] - cm[j]) : 0.0f;
          KE[i * (Q + 1) + j] = ke;
          Tm[i * (Q + 1) + j] = ke * dm.acc[a][b];
        }
      }
  });
  __syncthreads();
  // G replaces C; <G, S> and the skip's dD on the way.
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  float gs = 0.0f, dd = 0.0f;
  for (int e = threadIdx.x; e < P * N; e += blockDim.x) {
    const float g = grads[state_at + e];
    CG[(e / N) * (N + 1) + e % N] = g;
    gs += g * states[state_at + e];
  }
  for (int e = threadIdx.x; e < L * P; e += blockDim.x)
    dd += dys[(e / P) * (P + 1) + e % P] * xs[(e / P) * (P + 1) + e % P];
  gs = block_sum(gs, red);
  dd = block_sum(dd, red);  // block_sum ends with a barrier: CG holds G from here on
  const float d = D[ch.h];
  T* dxc = dx + ((ch.b * k.T + ch.t0) * k.H + ch.h) * P;
  for_tiles(L, P, [&](Tile& tile) {
    Tile gb = tile;
    gb.mac(SMat{Bs, N + 1, 1}, SMat{CG, 1, N + 1}, N);     // (G B_j)_p = sum_n B_jn G_pn
    tile.mac(SMat{KE, 1, Q + 1}, SMat{dys, P + 1, 1}, L);  // sum_i KE_ij dy_ip
#pragma unroll
    for (int a = 0; a < kTM; ++a)
#pragma unroll
      for (int b = 0; b < kTN; ++b) {
        const int j = tile.row(a), p = tile.col(b);
        if (j < L && p < P) {
          GB[j * (P + 1) + p] = gb.acc[a][b];
          dxc[int64_t(j) * k.H * P + p] = from_f32<T>(
              d * dys[j * (P + 1) + p] + dts[j] * tile.acc[a][b] + wv[j] * gb.acc[a][b]);
        }
      }
  });
  __syncthreads();
  // Per step j: ddt (partial) and dcum (all but the last step's chunk-wide terms).
  for (int j = threadIdx.x; j < L; j += blockDim.x) {
    float dw = 0.0f, col = 0.0f, row = 0.0f;
    for (int p = 0; p < P; ++p) dw += xs[j * (P + 1) + p] * GB[j * (P + 1) + p];
    for (int i = j; i < L; ++i) col += Tm[i * (Q + 1) + j];
    for (int i = 0; i <= j; ++i) row += Tm[j * (Q + 1) + i] * dts[i];
    const int64_t t = ch.t0 + j;
    ddt[(ch.b * k.T + t) * k.H + ch.h] = col + expf(cm[L - 1] - cm[j]) * dw;
    wdw[j] = wv[j] * dw;
    dcum[ch.bh * k.T + t] = row - dts[j] * col - wv[j] * dw;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = expf(cm[L - 1]) * gs;
    for (int j = 0; j < L; ++j) total += wdw[j];
    dcum[ch.bh * k.T + ch.t0 + L - 1] += total;
    partials[(ch.b * k.nc + ch.c) * 2 * k.H + k.H + ch.h] = dd;
  }
}

// Per-head dB, dC of one chunk (f32, [B,T,H,N]) and the carried state's dcum term. Shared
// memory: Cs, Bs [Q][N+1], xs, dys [Q][P+1], A2 [Q][Q+1] (dM E dt, j <= i), SG [P][N+1] (S_c,
// then G), part [Q][N/4] (row partial sums), per-step vectors.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dbc_kernel(Dims k, const T* __restrict__ x, const float* __restrict__ dt,
               const T* __restrict__ Bm, const T* __restrict__ Cm, const T* __restrict__ dy,
               const float* __restrict__ cum, const float* __restrict__ states,
               const float* __restrict__ grads, float* __restrict__ dBh, float* __restrict__ dCh,
               float* __restrict__ dcum) {
  extern __shared__ float smem[];
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int ns = (N + kTN - 1) / kTN;
  float* Cs = smem;
  float* Bs = Cs + Q * (N + 1);
  float* xs = Bs + Q * (N + 1);
  float* dys = xs + Q * (P + 1);
  float* A2 = dys + Q * (P + 1);
  float* SG = A2 + Q * (Q + 1);
  float* part = SG + P * (N + 1);
  float* cm = part + Q * ns;
  float* dts = cm + Q;
  float* wv = dts + Q;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  load_rows(Cs, Cm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N);
  load_rows(Bs, Bm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N);
  load_rows(xs, x, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P);
  load_rows(dys, dy, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P);
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  load_state(SG, states + state_at, P, N);
  __syncthreads();
  for (int j = threadIdx.x; j < L; j += blockDim.x) wv[j] = expf(cm[L - 1] - cm[j]) * dts[j];
  for_tiles(L, L, [&](Tile& tile) {
    tile.mac(SMat{dys, P + 1, 1}, SMat{xs, 1, P + 1}, P);  // dM_ij = dy_i . x_j
    tile.each([&](int i, int j, float dm) {
      A2[i * (Q + 1) + j] = j <= i ? dm * expf(cm[i] - cm[j]) * dts[j] : 0.0f;
    });
  });
  __syncthreads();
  const int64_t row0 = (ch.b * k.T + ch.t0) * k.H + ch.h;  // [B,T,H,N] row of step t0
  for_tiles(L, N, [&](Tile& tile) {
    tile.mac(SMat{dys, P + 1, 1}, SMat{SG, N + 1, 1}, P);  // (S^T dy_i)_n
#pragma unroll
    for (int a = 0; a < kTM; ++a) {
      const int i = tile.row(a);
      const float e = expf(cm[i < L ? i : L - 1]);
      float dot = 0.0f;  // this tile's columns of C_i . (exp(cum_i) S^T dy_i)
#pragma unroll
      for (int b = 0; b < kTN; ++b) {
        tile.acc[a][b] *= e;
        if (tile.col(b) < N && i < L) dot += tile.acc[a][b] * Cs[i * (N + 1) + tile.col(b)];
      }
      if (i < L) part[i * ns + tile.nt] = dot;
    }
    tile.mac(SMat{A2, Q + 1, 1}, SMat{Bs, N + 1, 1}, L);
    tile.each([&](int i, int n, float v) { dCh[(row0 + int64_t(i) * k.H) * N + n] = v; });
  });
  __syncthreads();
  load_state(SG, grads + state_at, P, N);  // G = G_{c+1} replaces S_c
  __syncthreads();
  for_tiles(L, N, [&](Tile& tile) {
    tile.mac(SMat{xs, P + 1, 1}, SMat{SG, N + 1, 1}, P);  // (G^T x_j)_n
#pragma unroll
    for (int a = 0; a < kTM; ++a) {
      const float w = wv[tile.row(a) < L ? tile.row(a) : L - 1];
#pragma unroll
      for (int b = 0; b < kTN; ++b) tile.acc[a][b] *= w;
    }
    tile.mac(SMat{A2, 1, Q + 1}, SMat{Cs, N + 1, 1}, L);  // sum_i A2_ij C_i
    tile.each([&](int j, int n, float v) { dBh[(row0 + int64_t(j) * k.H) * N + n] = v; });
  });
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    float s = 0.0f;
    for (int q = 0; q < ns; ++q) s += part[i * ns + q];
    dcum[ch.bh * k.T + ch.t0 + i] += s;
  }
}

// dB, dC [B,T,G,N] = sums of the per-head values (PT: f32, or bf16 on the span path) over each
// group's heads, in f32.
template <class T, class PT>
__global__ void sum_heads_kernel(Dims k, const PT* __restrict__ dBh,
                                 const PT* __restrict__ dCh, T* __restrict__ dB,
                                 T* __restrict__ dC) {
  const int64_t total = k.B * k.T * k.G * k.N, hpg = k.H / k.G;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = e % k.N, g = (e / k.N) % k.G, bt = e / (k.N * k.G);
    float sb = 0.0f, sc = 0.0f;
    for (int64_t h = g * hpg; h < (g + 1) * hpg; ++h) {
      sb += to_f32(dBh[(bt * k.H + h) * k.N + n]);
      sc += to_f32(dCh[(bt * k.H + h) * k.N + n]);
    }
    dB[e] = from_f32<T>(sb);
    dC[e] = from_f32<T>(sc);
  }
}

// sum_heads_kernel on bf16 per-head values (the span path), 8 columns (16 bytes) per thread: the
// same sums in the same order. Needs N % 8 == 0 and 16-byte aligned pointers.
__global__ void sum_heads8_kernel(Dims k, const bf16_t* __restrict__ dBh,
                                  const bf16_t* __restrict__ dCh, bf16_t* __restrict__ dB,
                                  bf16_t* __restrict__ dC) {
  const int64_t N8 = k.N / 8, total = k.B * k.T * k.G * N8, hpg = k.H / k.G;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = (e % N8) * 8, g = (e / N8) % k.G, bt = e / (N8 * k.G);
    float sb[8] = {}, sc[8] = {};
    for (int64_t h = g * hpg; h < (g + 1) * hpg; ++h) {
      const uint4 rb = *reinterpret_cast<const uint4*>(dBh + (bt * k.H + h) * k.N + n);
      const uint4 rc = *reinterpret_cast<const uint4*>(dCh + (bt * k.H + h) * k.N + n);
      bf16_t vb[8], vc[8];
      memcpy(vb, &rb, 16);
      memcpy(vc, &rc, 16);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        sb[q] += to_f32(vb[q]);
        sc[q] += to_f32(vc[q]);
      }
    }
    bf16_t ob[8], oc[8];
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      ob[q] = from_f32<bf16_t>(sb[q]);
      oc[q] = from_f32<bf16_t>(sc[q]);
    }
    uint4 wb, wc;
    memcpy(&wb, ob, 16);
    memcpy(&wc, oc, 16);
    *reinterpret_cast<uint4*>(dB + e * 8) = wb;
    *reinterpret_cast<uint4*>(dC + e * 8) = wc;
  }
}

// dB, dC [B,T,G,N] = sums of dbc_heads_tc_kernel's per-split partials [B,T,G,nsplit,N] (f32).
__global__ void sum_splits_kernel(Dims k, int64_t nsplit, const float* __restrict__ dBp,
                                  const float* __restrict__ dCp, bf16_t* __restrict__ dB,
                                  bf16_t* __restrict__ dC) {
  const int64_t total = k.B * k.T * k.G * k.N;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = e % k.N, btg = e / k.N;
    float sb = 0.0f, sc = 0.0f;
    for (int64_t q = 0; q < nsplit; ++q) {
      sb += dBp[(btg * nsplit + q) * k.N + n];
      sc += dCp[(btg * nsplit + q) * k.N + n];
    }
    dB[e] = from_f32<bf16_t>(sb);
    dC[e] = from_f32<bf16_t>(sc);
  }
}

// Through the cumsum, one thread per (b, chunk, h): da_k = sum_{i >= k} dcum_i, ddt_k += A da_k,
// and the chunk's dA partial sum_k dt_k da_k.
__global__ void finish_kernel(Dims k, const float* __restrict__ dt, const float* __restrict__ A,
                              const float* __restrict__ dcum, float* __restrict__ ddt,
                              float* __restrict__ partials) {
  const int64_t total = k.B * k.nc * k.H;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = e % k.H, c = (e / k.H) % k.nc, b = e / (k.H * k.nc);
    const int64_t t0 = c * k.Q, t1 = t0 + k.Q < k.T ? t0 + k.Q : k.T;
    const float a = A[h];
    float da = 0.0f, dA = 0.0f;
    constexpr int kBatch = 16;  // steps whose loads are in flight together (as the cumsum)
    for (int64_t tb = t1 - 1; tb >= t0; tb -= kBatch) {
      float dc[kBatch], dd[kBatch], dv[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t t = tb - u, i = (b * k.T + t) * k.H + h;
        dc[u] = t >= t0 ? dcum[(b * k.H + h) * k.T + t] : 0.0f;
        dd[u] = t >= t0 ? ddt[i] : 0.0f;
        dv[u] = t >= t0 ? dt[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t t = tb - u, i = (b * k.T + t) * k.H + h;
        if (t >= t0) {
          da += dc[u];
          ddt[i] = dd[u] + a * da;
          dA += dv[u] * da;
        }
      }
    }
    partials[(b * k.nc + c) * 2 * k.H + h] = dA;
  }
}

int64_t dx_smem(const Dims& k) {
  const int64_t qp = k.Q > k.P ? k.Q : k.P;
  return 4 * (qp * (k.N + 1) + k.Q * (k.N + 1) + 3 * k.Q * (k.P + 1) + 2 * k.Q * (k.Q + 1) +
              4 * k.Q);
}
int64_t dbc_smem(const Dims& k) {
  const int64_t ns = (k.N + kTN - 1) / kTN;
  return 4 * (2 * k.Q * (k.N + 1) + 2 * k.Q * (k.P + 1) + k.Q * (k.Q + 1) + k.P * (k.N + 1) +
              k.Q * ns + 3 * k.Q);
}

}  // namespace

// The bf16 backward by spans (ssd_state_tc_cuda.cu): the chunk states S_c and the state
// gradients G_{c+1} as bf16 per chunk, each from a span pass (the span's own part, the pass over
// spans, then the span rerun from its entering state writing every chunk's), then the per-chunk
// dx and dB/dC kernels on them (dBh, dCh in bf16), the sum over heads and the cumsum's backward.
void backward_spans(const Dims& k, const bf16_t* x, const float* dt, const float* A,
                    const bf16_t* Bm, const bf16_t* Cm, const float* D, const float* h0,
                    const bf16_t* dy, const float* dhT, bf16_t* dx, float* ddt, float* dA,
                    bf16_t* dB, bf16_t* dC, float* dD, float* dh0, float* scratch,
                    cudaStream_t s, const float* saved) {
  SpanScratch sc = span_scratch(k, scratch, saved != nullptr);
  const int m = span_len(k);
  mark("start", s);
  if (saved) {  // the forward's cum and S_c (ssd_forward_cuda.cu): nothing to rerun
    const SpanSaved kept = span_saved(k, const_cast<float*>(saved));
    sc.cum = kept.cum;
    sc.states = kept.states;
  } else {
    launch_chunk_cumsum(k, dt, A, sc.cum, s);
    mark("bwd cumsum", s);
    launch_span_states_tc(k, m, x, Bm, dt, sc.cum, true, false, nullptr, sc.spans, nullptr, s);
    mark("bwd span_states (x, B)", s);
    launch_span_passing(k, m, sc.cum, h0, sc.spans, nullptr, false, s);
    mark("bwd span_passing", s);
    launch_span_states_tc(k, m, x, Bm, dt, sc.cum, true, false, sc.spans, nullptr, sc.states, s);
    mark("bwd span_states (x, B) -> S_c", s);
  }
  launch_span_states_tc(k, m, dy, Cm, dt, sc.cum, false, true, nullptr, sc.spans, nullptr, s);
  mark("bwd span_states (dy, C)", s);
  launch_span_passing(k, m, sc.cum, dhT, sc.spans, dh0, true, s);
  mark("bwd span_passing (reverse)", s);
  launch_span_states_tc(k, m, dy, Cm, dt, sc.cum, false, true, sc.spans, nullptr, sc.grads, s);
  mark("bwd span_states (dy, C) -> G_c", s);
  const int64_t work = k.B * k.nc * k.H;
  const bool by_splits = dbc_heads_fit(k);
  if (work > 0) {
    launch_dx_tc(k, x, dt, Bm, Cm, D, dy, sc.cum, sc.grads, dx, ddt, sc.dcum, sc.partials, s);
    mark("bwd dx", s);
    if (by_splits) {
      launch_dbc_heads_tc(k, x, dt, Bm, Cm, dy, sc.cum, sc.states, sc.grads,
                          reinterpret_cast<float*>(sc.dBh), reinterpret_cast<float*>(sc.dCh),
                          sc.dcum, s);
      mark("bwd dbc (heads summed in blocks)", s);
    } else {
      launch_dbc_tc(k, x, dt, Bm, Cm, dy, sc.cum, sc.states, sc.grads, sc.dBh, sc.dCh, sc.dcum,
                    s);
      mark("bwd dbc", s);
    }
  }
  const int64_t bc = k.B * k.T * k.G * k.N;
  if (bc > 0 && by_splits) {
    sum_splits_kernel<<<grid_for(bc, 256), 256, 0, s>>>(
        k, dbc_heads_splits(k), reinterpret_cast<const float*>(sc.dBh),
        reinterpret_cast<const float*>(sc.dCh), dB, dC);
    AMOR_CUDA_CHECK_LAUNCH();
    mark("bwd sum_splits", s);
  } else if (bc > 0) {
    if (k.N % 8 == 0 && aligned16(sc.dBh) && aligned16(sc.dCh) && aligned16(dB) &&
        aligned16(dC)) {
      sum_heads8_kernel<<<grid_for(bc / 8, 256), 256, 0, s>>>(k, sc.dBh, sc.dCh, dB, dC);
    } else {
      sum_heads_kernel<bf16_t, bf16_t><<<grid_for(bc, 256), 256, 0, s>>>(k, sc.dBh, sc.dCh, dB,
                                                                         dC);
    }
    AMOR_CUDA_CHECK_LAUNCH();
    mark("bwd sum_heads", s);
  }
  if (work > 0) {
    finish_kernel<<<grid_for(work, 128), 128, 0, s>>>(k, dt, A, sc.dcum, ddt, sc.partials);
    AMOR_CUDA_CHECK_LAUNCH();
    mark("bwd finish", s);
  }
  column_sum(sc.partials, k.B * k.nc, 2 * k.H, dA, k.H, dD, s);
  mark("bwd column_sum", s);
}

}  // namespace ssd

int64_t ssd_smem_bytes(const SsdDims& d) {
  const ssd::Dims k = ssd::dims_of(d);
  int64_t m = ssd::forward_smem(k);
  m = m > ssd::dx_smem(k) ? m : ssd::dx_smem(k);
  m = m > ssd::backward_tc_smem(k) ? m : ssd::backward_tc_smem(k);
  return m > ssd::dbc_smem(k) ? m : ssd::dbc_smem(k);
}

int64_t ssd_backward_scratch_floats(DType t, const SsdDims& d, bool saved) {
  const ssd::Dims k = ssd::dims_of(d);
  if (t == DType::BF16 && ssd::use_spans(k)) return ssd::span_scratch(k, nullptr, saved).floats;
  return ssd::scratch_floats(k, true) - (saved ? ssd::scratch_floats(k, false) : 0);
}

void ssd_backward(DType t, const SsdDims& d, const void* x, const float* dt, const float* A,
                  const void* Bm, const void* Cm, const float* D, const float* h0, const void* dy,
                  const float* dhT, void* dx, float* ddt, float* dA, void* dB, void* dC,
                  float* dD, float* dh0, float* scratch, cudaStream_t s, const float* saved) {
  using namespace ssd;
  const Dims k = dims_of(d);
  if (t == DType::BF16 && use_spans(k)) {
    backward_spans(k, static_cast<const bf16_t*>(x), dt, A, static_cast<const bf16_t*>(Bm),
                   static_cast<const bf16_t*>(Cm), D, h0, static_cast<const bf16_t*>(dy), dhT,
                   static_cast<bf16_t*>(dx), ddt, dA, static_cast<bf16_t*>(dB),
                   static_cast<bf16_t*>(dC), dD, dh0, scratch, s, saved);
    return;
  }
  // With saved: the forward's cum and entering states (read only), the rest in scratch.
  const Scratch sc =
      saved ? carve_saved(k, const_cast<float*>(saved), scratch) : carve(k, scratch, true);
  mark("start", s);
  if (!saved) {
    launch_chunk_cumsum(k, dt, A, sc.cum, s);
    launch_chunk_outer(t, k, x, Bm, dt, sc.cum, true, sc.states, s);
    launch_state_passing(k, sc.cum, h0, sc.states, nullptr, s);
    mark("bwd rerun (cumsum, chunk_outer, state_passing)", s);
  }
  launch_chunk_outer(t, k, dy, Cm, dt, sc.cum, false, sc.grads, s);
  mark("bwd chunk_outer (dy, C)", s);
  if (k.B * k.H * k.P * k.N > 0) {
    state_grad_passing_kernel<<<dim3(unsigned(ceil_div(k.P * k.N, 256)), unsigned(k.B * k.H)),
                                256, 0, s>>>(k, sc.cum, dhT, sc.grads, dh0);
    AMOR_CUDA_CHECK_LAUNCH();
  }
  mark("bwd state_grad_passing", s);
  const int64_t work = k.B * k.nc * k.H;
  dispatch_storage(t, "cuda ssd_backward", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* x_ = static_cast<const T_*>(x);
    const T_* B_ = static_cast<const T_*>(Bm);
    const T_* C_ = static_cast<const T_*>(Cm);
    const T_* dy_ = static_cast<const T_*>(dy);
    if constexpr (std::is_same_v<T_, bf16_t>) {  // tensor cores (ssd_backward_tc_cuda.cu)
      if (work > 0) {
        launch_dx_tc(k, x_, dt, B_, C_, D, dy_, sc.cum, sc.states, sc.grads,
                     static_cast<T_*>(dx), ddt, sc.dcum, sc.partials, s);
        mark("bwd dx", s);
        launch_dbc_tc(k, x_, dt, B_, C_, dy_, sc.cum, sc.states, sc.grads, sc.dBh, sc.dCh,
                      sc.dcum, s);
        mark("bwd dbc", s);
      }
    } else if (work > 0) {
      launch_chunks(dx_kernel<T_>, k, dx_smem(k), s, k, x_, dt, B_, C_, D, dy_, sc.cum,
                    sc.states, sc.grads, static_cast<T_*>(dx), ddt, sc.dcum, sc.partials);
      launch_chunks(dbc_kernel<T_>, k, dbc_smem(k), s, k, x_, dt, B_, C_, dy_, sc.cum, sc.states,
                    sc.grads, sc.dBh, sc.dCh, sc.dcum);
    }
    const int64_t bc = k.B * k.T * k.G * k.N;
    if (bc > 0) {
      sum_heads_kernel<T_, float><<<grid_for(bc, 256), 256, 0, s>>>(k, sc.dBh, sc.dCh,
                                                             static_cast<T_*>(dB),
                                                             static_cast<T_*>(dC));
      AMOR_CUDA_CHECK_LAUNCH();
      mark("bwd sum_heads", s);
    }
  });
  if (work > 0) {
    finish_kernel<<<grid_for(work, 128), 128, 0, s>>>(k, dt, A, sc.dcum, ddt, sc.partials);
    AMOR_CUDA_CHECK_LAUNCH();
  }
  column_sum(sc.partials, k.B * k.nc, 2 * k.H, dA, k.H, dD, s);
  mark("bwd finish, column_sum", s);
}

}  // namespace amor::cuda
