// Mamba2 SSD scan backward on tensor cores, for bf16 storage: the dx and dB/dC kernels of
// ssd_backward_cuda.cu (same math, notation, inputs, outputs and blocks: 256 threads per
// (b, h, chunk)) with their matrix products as mma m16n8k16 on bf16 tiles in shared memory and
// f32 accumulation (ssd_mma.cuh); f32 inputs keep the SIMT kernels there. Per chunk:
//   dx kernel   K = C B^T, dM = dy x^T           (Q x Q, K = N and K = P; above-diagonal
//                                                 tiles skipped)
//               KE = K E masked, rounded to bf16; Tm = dM K E stays f32 (ddt, dcum)
//               G B_j (Q x P, K = N, G rounded to bf16), KE^T dy (Q x P, K = Q, causal part)
//   dbc kernel  dM = dy x^T, A2 = dM E dt masked, rounded to bf16
//               dC = diag(exp(cum)) dy S + A2 B   (Q x N, K = P then the causal part of Q)
//               dB = diag(w) x G + A2^T C         (Q x N, K = P then the causal part of Q)
//               dcum_i += C_i . (exp(cum_i) S^T dy_i): per warp tile a row sum over its 32
//               columns (quad shuffles), then a fixed-order sum over the tiles (no atomics)
// The reductions over steps (ddt, dcum, dD, <G, S>) stay f32 scalar code on f32 values.
// Shared memory at Q = 64, P = 64, N = 128: dx 94.5 KiB, dbc 80 KiB (two blocks per SM each,
// also by their 112 and 116 registers; the f32 kernels' 147 KiB and 154 KiB fit one).
#include "kernels/ssd/ssd_mma.cuh"

namespace amor::cuda {
namespace ssd {
namespace {

using tc::pad16;
using tc::stride_of;
using tc::tile_bytes;
using tc::WarpTile;

// dx, the partial ddt and dcum, the dD partial of one chunk (see dx_kernel).
__global__ void __launch_bounds__(kThreads)
    dx_tc_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                 const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                 const float* __restrict__ D, const bf16_t* __restrict__ dy,
                 const float* __restrict__ cum, const float* __restrict__ states,
                 const float* __restrict__ grads, bf16_t* __restrict__ dx,
                 float* __restrict__ ddt, float* __restrict__ dcum,
                 float* __restrict__ partials) {
  extern __shared__ uint4 smem_raw[];
  __shared__ float red[32];
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int QP = Q > P ? Q : P;
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  unsigned char* at = reinterpret_cast<unsigned char*>(smem_raw);
  bf16_t* CG = reinterpret_cast<bf16_t*>(at);  // C rows, then G as [P][N]
  at += tile_bytes(QP, N);
  bf16_t* Bs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* xs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* dys = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* KE = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, Q);
  float* Tm = reinterpret_cast<float*>(at);  // [Q][Q+1]
  float* GB = Tm + Q * (Q + 1);              // [Q][P+1]
  float* cm = GB + Q * (P + 1);
  float* dts = cm + Q;
  float* wv = dts + Q;
  float* wdw = wv + Q;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  tc::load_rows_bf16(CG, sN, Cm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  tc::load_rows_bf16(Bs, sN, Bm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  tc::load_rows_bf16(xs, sP, x, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P, nullptr);
  tc::load_rows_bf16(dys, sP, dy, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P, nullptr);
  __syncthreads();
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  for (int j = threadIdx.x; j < L; j += blockDim.x) wv[j] = expf(cm[L - 1] - cm[j]) * dts[j];
  // KE = K E (bf16, zero off j <= i and in the padding) and Tm = dM K E (f32) on j <= i.
  tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
    WarpTile<1, 2> ke(m0, n0, Lp, Lp), dm(m0, n0, Lp, Lp);
    if (n0 <= m0 + 15) {  // else all above the diagonal
      ke.mac<false, false>(CG, sN, Bs, sN, 0, Np);
      dm.mac<false, false>(dys, sP, xs, sP, 0, Pp);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = ke.row(0, e), c = ke.col(j, e);
        if (c >= Lp) continue;
        const float v = c <= r && r < L ? ke.c[0][j][e] * expf(cm[r] - cm[c]) : 0.0f;
        KE[r * sQ + c] = from_f32<bf16_t>(v);
        if (r < L && c < L) Tm[r * (Q + 1) + c] = v * dm.c[0][j][e];
      }
  });
  __syncthreads();
  // G replaces C; <G, S> and the skip's dD on the way.
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  float gs = tc::load_state_bf16(CG, sN, grads + state_at, P, N, states + state_at);
  float dd = 0.0f;
  for (int e = threadIdx.x; e < L * P; e += blockDim.x)
    dd += to_f32(dys[(e / P) * sP + e % P]) * to_f32(xs[(e / P) * sP + e % P]);
  gs = block_sum(gs, red);
  dd = block_sum(dd, red);  // block_sum ends with a barrier: CG holds G from here on
  const float d = D[ch.h];
  bf16_t* dxc = dx + ((ch.b * k.T + ch.t0) * k.H + ch.h) * P;
  tc::for_warp_tiles<1, 2>(Lp, Pp, [&](int m0, int n0) {
    WarpTile<1, 2> gb(m0, n0, Lp, Pp), acc(m0, n0, Lp, Pp);
    gb.mac<false, false>(Bs, sN, CG, sN, 0, Np);     // (G B_j)_p = sum_n B_jn G_pn
    acc.mac<true, true>(KE, sQ, dys, sP, m0, Lp);    // sum_{i >= j} KE_ij dy_ip
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = gb.row(0, e), p = gb.col(j, e);
        if (r < L && p < P) {
          GB[r * (P + 1) + p] = gb.c[0][j][e];
          dxc[int64_t(r) * k.H * P + p] = from_f32<bf16_t>(
              d * to_f32(dys[r * sP + p]) + dts[r] * acc.c[0][j][e] + wv[r] * gb.c[0][j][e]);
        }
      }
  });
  __syncthreads();
  // Per step j: ddt (partial) and dcum (all but the last step's chunk-wide terms). Four threads
  // (a quad) per step, each summing every fourth term, combined by quad shuffles.
  for (int j0 = 0; j0 < L; j0 += kThreads / 4) {
    const int j = j0 + int(threadIdx.x) / 4, q = int(threadIdx.x) % 4;
    float dw = 0.0f, col = 0.0f, row = 0.0f;
    if (j < L) {
      for (int p = q; p < P; p += 4) dw += to_f32(xs[j * sP + p]) * GB[j * (P + 1) + p];
      for (int i = j + q; i < L; i += 4) col += Tm[i * (Q + 1) + j];
      for (int i = q; i <= j; i += 4) row += Tm[j * (Q + 1) + i] * dts[i];
    }
    dw = subwarp_sum(dw, 4);
    col = subwarp_sum(col, 4);
    row = subwarp_sum(row, 4);
    if (j < L && q == 0) {
      const int64_t t = ch.t0 + j;
      ddt[(ch.b * k.T + t) * k.H + ch.h] = col + expf(cm[L - 1] - cm[j]) * dw;
      wdw[j] = wv[j] * dw;
      dcum[ch.bh * k.T + t] = row - dts[j] * col - wv[j] * dw;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = expf(cm[L - 1]) * gs;
    for (int j = 0; j < L; ++j) total += wdw[j];
    dcum[ch.bh * k.T + ch.t0 + L - 1] += total;
    partials[(ch.b * k.nc + ch.c) * 2 * k.H + k.H + ch.h] = dd;
  }
}

// Per-head dB, dC of one chunk (f32, [B,T,H,N]) and the carried state's dcum term (see
// dbc_kernel).
__global__ void __launch_bounds__(kThreads)
    dbc_tc_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                  const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                  const bf16_t* __restrict__ dy, const float* __restrict__ cum,
                  const float* __restrict__ states, const float* __restrict__ grads,
                  float* __restrict__ dBh, float* __restrict__ dCh, float* __restrict__ dcum) {
  extern __shared__ uint4 smem_raw[];
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  const int nparts = (Np + 31) / 32;  // warp tiles across N (32 columns each)
  unsigned char* at = reinterpret_cast<unsigned char*>(smem_raw);
  bf16_t* Cs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* Bs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* xs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* dys = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* A2 = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, Q);
  bf16_t* SG = reinterpret_cast<bf16_t*>(at);  // S_c, then G, as [P][N]
  at += tile_bytes(P, N);
  float* part = reinterpret_cast<float*>(at);  // [pad16(Q)][nparts]
  float* cm = part + pad16(Q) * nparts;
  float* dts = cm + Q;
  float* wv = dts + Q;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  tc::load_rows_bf16(Cs, sN, Cm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  tc::load_rows_bf16(Bs, sN, Bm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  tc::load_rows_bf16(xs, sP, x, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P, nullptr);
  tc::load_rows_bf16(dys, sP, dy, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P, nullptr);
  const int64_t state_at = (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  tc::load_state_bf16(SG, sN, states + state_at, P, N, nullptr);
  __syncthreads();
  for (int j = threadIdx.x; j < L; j += blockDim.x) wv[j] = expf(cm[L - 1] - cm[j]) * dts[j];
  // A2 = dM E dt on j <= i (bf16, zero elsewhere and in the padding).
  tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
    WarpTile<1, 2> dm(m0, n0, Lp, Lp);
    if (n0 <= m0 + 15) dm.mac<false, false>(dys, sP, xs, sP, 0, Pp);  // dM_ij = dy_i . x_j
    dm.each([&](int i, int j, float& v) {
      const float a = j <= i && i < L ? v * expf(cm[i] - cm[j]) * dts[j] : 0.0f;
      A2[i * sQ + j] = from_f32<bf16_t>(a);
    });
  });
  __syncthreads();
  const int64_t row0 = (ch.b * k.T + ch.t0) * k.H + ch.h;  // [B,T,H,N] row of step t0
  tc::for_warp_tiles<2, 2>(Lp, Np, [&](int m0, int n0) {
    WarpTile<2, 2> t(m0, n0, Lp, Np);
    t.mac<false, true>(dys, sP, SG, sN, 0, Pp);  // (S^T dy_i)_n = sum_p dy_ip S_pn
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the fragment
        const int r = t.row(i, 2 * h);
        const float e = expf(cm[r < L ? r : L - 1]);
        float dot = 0.0f;  // this lane's columns of C_r . (exp(cum_r) S^T dy_r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            float& v = t.c[i][j][2 * h + q];
            v *= e;
            const int c = t.col(j, 2 * h + q);  // (the stride's padding is never written)
            if (r < Lp && c < Np) dot += v * to_f32(Cs[r * sN + c]);
          }
        dot = subwarp_sum(dot, 4);  // the quad holds the row's 32 columns
        if (r < Lp && threadIdx.x % 4 == 0) part[r * nparts + n0 / 32] = dot;
      }
    t.mac<false, true>(A2, sQ, Bs, sN, 0, m0 + 32 < Lp ? m0 + 32 : Lp);  // sum_{j <= i} A2_ij B_j
    t.each([&](int i, int n, float& v) {
      if (i < L && n < N) dCh[(row0 + int64_t(i) * k.H) * N + n] = v;
    });
  });
  __syncthreads();
  tc::load_state_bf16(SG, sN, grads + state_at, P, N, nullptr);  // G_{c+1} replaces S_c
  __syncthreads();
  tc::for_warp_tiles<2, 2>(Lp, Np, [&](int m0, int n0) {
    WarpTile<2, 2> t(m0, n0, Lp, Np);
    t.mac<false, true>(xs, sP, SG, sN, 0, Pp);  // (G^T x_j)_n = sum_p x_jp G_pn
    t.each([&](int j, int, float& v) { v *= wv[j < L ? j : L - 1]; });
    t.mac<true, true>(A2, sQ, Cs, sN, m0, Lp);  // sum_{i >= j} A2_ij C_i
    t.each([&](int j, int n, float& v) {
      if (j < L && n < N) dBh[(row0 + int64_t(j) * k.H) * N + n] = v;
    });
  });
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    float s = 0.0f;
    for (int q = 0; q < nparts; ++q) s += part[i * nparts + q];
    dcum[ch.bh * k.T + ch.t0 + i] += s;
  }
}

int64_t dx_tc_smem(const Dims& k) {
  const int64_t qp = k.Q > k.P ? k.Q : k.P;
  return tile_bytes(qp, k.N) + tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) +
         tile_bytes(k.Q, k.Q) + 4 * (k.Q * (k.Q + 1) + k.Q * (k.P + 1) + 4 * k.Q);
}
int64_t dbc_tc_smem(const Dims& k) {
  const int64_t nparts = (pad16(int(k.N)) + 31) / 32;
  return 2 * tile_bytes(k.Q, k.N) + 2 * tile_bytes(k.Q, k.P) + tile_bytes(k.Q, k.Q) +
         tile_bytes(k.P, k.N) + 4 * (pad16(int(k.Q)) * nparts + 3 * k.Q);
}

// Launches a per-chunk kernel (grid: chunks x batch*heads) with `bytes` of dynamic shared memory,
// raising the kernel's limit above the default 48 KiB first.
template <class K, class... Args>
void launch_chunks(K kernel, const Dims& k, int64_t bytes, cudaStream_t s, Args... args) {
  AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(bytes)));
  kernel<<<dim3(unsigned(k.nc), unsigned(k.B * k.H)), kThreads, size_t(bytes), s>>>(args...);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_dx_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                  const bf16_t* Cm, const float* D, const bf16_t* dy, const float* cum,
                  const float* states, const float* grads, bf16_t* dx, float* ddt, float* dcum,
                  float* partials, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  launch_chunks(dx_tc_kernel, k, dx_tc_smem(k), s, k, x, dt, Bm, Cm, D, dy, cum, states, grads,
                dx, ddt, dcum, partials);
}

void launch_dbc_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                   const bf16_t* Cm, const bf16_t* dy, const float* cum, const float* states,
                   const float* grads, float* dBh, float* dCh, float* dcum, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  launch_chunks(dbc_tc_kernel, k, dbc_tc_smem(k), s, k, x, dt, Bm, Cm, dy, cum, states, grads,
                dBh, dCh, dcum);
}

int64_t backward_tc_smem(const Dims& k) {
  const int64_t a = dx_tc_smem(k), b = dbc_tc_smem(k);
  return a > b ? a : b;
}

}  // namespace ssd
}  // namespace amor::cuda
