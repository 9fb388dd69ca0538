// Gated delta rule forward on the GPU: the chunked WY/UT algorithm of gated_delta_chunked_ref.h
// (read its comment for the derivation). Per head, time is cut into chunks of L <= 64 steps; in a
// chunk with rows r = 0..n-1 and state S [K,V] at its start:
//   gam_r = g_0 + ... + g_r (f32),  e_r = exp(gam_r),  D_rj = exp(gam_r - gam_j)
//   A_rj = beta_r (k_r . k_j) D_rj (j < r),   Tm = (I + A)^-1 (blocked forward substitution)
//   W = Tm diag(beta e) K,   U = Tm diag(beta) V,   Vn = U - W S
//   O = scale diag(e) Q S + P Vn,   P_rj = scale (q_r . k_j) D_rj (j <= r)
//   S' = e_{n-1} S + sum_j D_{n-1,j} k_j Vn_j^T
// Three kernels (as flash-linear-attention structures chunk_gated_delta_rule_fwd):
//  1. gdn_prepare_kernel, one block per (chunk, head, batch), all chunks in parallel: gam, A, Tm,
//     W, U from the chunk's k, v, g, beta (nothing depends on the state). Writes gam [BH,T], W
//     [BH,T,K], U [BH,T,V] to the f32 scratch, and Tm [BH,T,L] when the backward asks.
//  2. gdn_state_fwd_kernel, one block per (32 columns of V, head, batch), sequential over the
//     chunks: the columns of S are independent (every product above mixes rows of S, never
//     columns), so V is split across blocks. The block keeps its S [K,32] slice in shared memory,
//     stores it as the chunk's start state ([BH,NC,K,V] f32), turns U into Vn in place, and
//     advances S. This pass is the only sequential part: its cost is NC steps of two [n,K]x[K,32]
//     sized products (U is loaded with W and k up front: one memory latency per chunk, not one
//     per output element as a read-modify-write in the product's epilogue would cost).
//  3. gdn_output_kernel, one block per (chunk, head, batch), all chunks in parallel: P from q, k,
//     gam, then O in 32-column tiles of V from the chunk's start state and Vn.
// Memory traffic: q, k, v read twice or three times (prepare, state pass, output), W and Vn
// written and read in f32, one K x V f32 state per chunk written and read (for T = 2K, K = 64,
// V = 128 that is 32 KB per chunk, the same order as the chunk's activations).
// Tiling: every operand tile of a block lives in shared memory as f32 (q, k rows padded to K + 1
// floats, V tiles to 36 against bank conflicts). The products (K K^T, Q K^T, Tm diag(beta e) K,
// Tm diag(beta) V, W S, the state update K^T diag(dec) Vn, and O = [scale diag(e) Q | P] [S; Vn] as
// one product) go through block_mm_t<T> (gated_delta_tc.cuh): for bf16 inputs warp mma.sync
// m16n8k16 on operands rounded to bf16 with f32 accumulation, for f32 inputs the exact SIMT
// block_mm (4 x 4 register tiles). The cumulative sums, exps and the triangular solve (ut_inverse:
// 16 x 16 diagonal blocks by substitution, then 3 block rows with two barriers each, instead of
// one barrier per row) stay f32 SIMT; the carried state S stays f32 in shared memory (only its
// operand copy is rounded).
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"
#include "kernels/gated_delta/gated_delta_tc.cuh"

namespace amor::cuda {
namespace gdn {
namespace {

// Tm = (I + A)^-1 for A strictly lower triangular (rows and columns < n of [*, L] tiles; Tm holds
// the identity on entry), in f32, in 16 x 16 blocks instead of 63 row steps with a barrier each:
//  1. each diagonal block Tm_ii = (I + A_ii)^-1, one thread per column: forward substitution
//     x_r = -sum_{j<=m<r} A_rm x_m down its column (x_j = 1), no barriers;
//  2. block rows i = 1, 2, ... in order (block row i needs the finished block rows above):
//     (I + A_ii) Tm_ij + sum_{j<=b<i} A_ib Tm_bj = 0, so Tm_ij = -Tm_ii X_ij with
//     X_ij = sum_{b<i} A_ib Tm_bj (Tm_bj = 0 for b < j), two barriers per block row.
__device__ __forceinline__ void ut_inverse(const float* A, float* Tm, float* X, int n, int L) {
  constexpr int kB = 16;
  const int nb = (n + kB - 1) / kB;
  for (int col = threadIdx.x; col < nb * kB; col += blockDim.x) {
    const int j = col, end = (j / kB + 1) * kB < n ? (j / kB + 1) * kB : n;
    if (j >= n) continue;
    for (int r = j + 1; r < end; ++r) {
      float acc = A[r * L + j];  // x_j = 1
      for (int m = j + 1; m < r; ++m) acc += A[r * L + m] * Tm[m * L + j];
      Tm[r * L + j] = -acc;
    }
  }
  for (int bi = 1; bi < nb; ++bi) {
    const int r0 = bi * kB, rows = n - r0 < kB ? n - r0 : kB;
    __syncthreads();  // block rows above (and the diagonal blocks) final; X no longer read
    for (int idx = threadIdx.x; idx < rows * r0; idx += blockDim.x) {
      const int r = idx / r0, c = idx % r0;
      float acc = 0.0f;
      for (int m = c; m < r0; ++m) acc += A[(r0 + r) * L + m] * Tm[m * L + c];
      X[r * L + c] = acc;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * r0; idx += blockDim.x) {
      const int r = idx / r0, c = idx % r0;
      float acc = 0.0f;
      for (int m = 0; m <= r; ++m) acc += Tm[(r0 + r) * L + r0 + m] * X[m * L + c];
      Tm[(r0 + r) * L + c] = -acc;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    gdn_prepare_kernel(const T* __restrict__ k, const T* __restrict__ v, const void* g,
                       const void* beta, bool gate_f32, Dims d, float* __restrict__ gam_out,
                       float* __restrict__ W_out, float* __restrict__ U_out,
                       float* __restrict__ Tm_out) {
  extern __shared__ float smem[];
  Carve carve{smem};
  PrepareSmem s(carve, d);
  const ChunkPos p = chunk_pos(d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0, KP = K + 1, VP = V + 4;

  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const int64_t i = (p.b * d.T + p.t0 + r) * d.H + p.h;
    s.be[r] = load_any(g, i, gate_f32);  // the raw g until the cumulative sum below
    s.beta[r] = load_any(beta, i, gate_f32);
  }
  load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, KP);
  load_rows(v, d, p.b, p.h, p.t0, n, V, 0, int(V), s.v, VP);
  for (int idx = threadIdx.x; idx < L * L; idx += blockDim.x)
    s.Tm[idx] = (idx / L == idx % L) ? 1.0f : 0.0f;
  __syncthreads();
  // The chunk's cumulative log decay: row r sums g_0 .. g_r in order (the sequential sum's
  // rounding), all rows at once.
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float acc = 0.0f;
    for (int m = 0; m <= r; ++m) acc += s.be[m];
    s.gam[r] = acc;
    gam_out[row0 + r] = acc;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += blockDim.x) s.be[r] = s.beta[r] * expf(s.gam[r]);
  // A_rj = beta_r (k_r . k_j) D_rj, strictly lower.
  block_mm_t<T>(
      n, n, int(K), [&](int r, int i) { return s.k[r * KP + i]; },
      [&](int i, int j) { return s.k[j * KP + i]; },
      [&](int r, int j, float kk) {
        s.A[r * L + j] = j < r ? s.beta[r] * kk * expf(s.gam[r] - s.gam[j]) : 0.0f;
      });
  __syncthreads();
  ut_inverse(s.A, s.Tm, s.X, n, L);
  __syncthreads();
  // W = Tm diag(beta e) K and U = Tm diag(beta) V (Tm is zero above the diagonal).
  block_mm_t<T, Tri::kLower>(
      n, int(K), n, [&](int r, int j) { return s.Tm[r * L + j]; },
      [&](int j, int i) { return s.be[j] * s.k[j * KP + i]; },
      [&](int r, int i, float w) { W_out[(row0 + r) * K + i] = w; });
  block_mm_t<T, Tri::kLower>(
      n, int(V), n, [&](int r, int j) { return s.Tm[r * L + j]; },
      [&](int j, int c) { return s.beta[j] * s.v[j * VP + c]; },
      [&](int r, int c, float u) { U_out[(row0 + r) * V + c] = u; });
  if (Tm_out) {
    for (int idx = threadIdx.x; idx < n * L; idx += blockDim.x) Tm_out[row0 * L + idx] = s.Tm[idx];
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    gdn_state_fwd_kernel(const T* __restrict__ k, const float* __restrict__ gam,
                         const float* __restrict__ W, float* __restrict__ UVn, const void* s0,
                         bool state_f32, Dims d, float* __restrict__ S_out,
                         float* __restrict__ s_final) {
  extern __shared__ float smem[];
  Carve carve{smem};
  StateFwdSmem s(carve, d);
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * d.H + h, K = d.K, V = d.V;
  const int64_t KP = K + 1;  // padded row stride of the q and k tiles (column reads conflict-free)
  const int64_t c0 = int64_t(blockIdx.x) * kVt;
  const int w = int(V - c0 < kVt ? V - c0 : kVt);
  const int64_t KV = K * V;

  for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
    const int i = idx / w, c = idx % w;
    s.S[i * kVs + c] = s0 ? load_any(s0, bh * KV + i * V + c0 + c, state_f32) : 0.0f;
  }
  for (int64_t ch = 0; ch < d.NC; ++ch) {
    const int64_t t0 = ch * d.L, row0 = bh * d.T + t0;
    const int n = int(d.T - t0 < d.L ? d.T - t0 : d.L);
    __syncthreads();  // S complete; the previous chunk's tiles no longer read
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      S_out[(bh * d.NC + ch) * KV + i * V + c0 + c] = s.S[i * kVs + c];
    }
    load_scratch(W, row0, n, K, 0, int(K), s.W, K);
    load_rows(k, d, b, h, t0, n, K, 0, int(K), s.k, KP);
    load_scratch(UVn, row0, n, V, c0, w, s.Vn, kVs);  // U, all loads issued together
    for (int r = threadIdx.x; r < n; r += blockDim.x) s.gam[r] = gam[row0 + r];
    __syncthreads();
    // Vn = U - W S (in place in the scratch, and kept in shared memory).
    block_mm_t<T>(
        n, w, int(K), [&](int r, int i) { return s.W[r * K + i]; },
        [&](int i, int c) { return s.S[i * kVs + c]; },
        [&](int r, int c, float ws) {
          const float vn = s.Vn[r * kVs + c] - ws;
          s.Vn[r * kVs + c] = vn;
          UVn[(row0 + r) * V + c0 + c] = vn;
        });
    const float glast = s.gam[n - 1], elast = expf(glast);
    for (int j = threadIdx.x; j < n; j += blockDim.x) s.dec[j] = expf(glast - s.gam[j]);
    __syncthreads();
    // S' = e_{n-1} S + sum_j D_{n-1,j} k_j Vn_j^T (each S element read and written by one thread).
    block_mm_t<T>(
        int(K), w, n, [&](int i, int j) { return s.dec[j] * s.k[j * KP + i]; },
        [&](int j, int c) { return s.Vn[j * kVs + c]; },
        [&](int i, int c, float kv) { s.S[i * kVs + c] = elast * s.S[i * kVs + c] + kv; });
  }
  __syncthreads();
  if (s_final) {
    for (int idx = threadIdx.x; idx < K * w; idx += blockDim.x) {
      const int i = idx / w, c = idx % w;
      s_final[bh * KV + i * V + c0 + c] = s.S[i * kVs + c];
    }
  }
}

// Three blocks per SM (its ~68 KB of shared memory allow them; left alone, the bf16 build takes
// 121 registers a thread, which allow two; ptxas fits it in 80 without spills).
template <class T>
__global__ void __launch_bounds__(kThreads, 3)
    gdn_output_kernel(const T* __restrict__ q, const T* __restrict__ k,
                      const float* __restrict__ gam, const float* __restrict__ Vn,
                      const float* __restrict__ S_in, float scale, Dims d, T* __restrict__ o) {
  extern __shared__ float smem[];
  Carve carve{smem};
  OutputSmem s(carve, d);
  const ChunkPos p = chunk_pos(d);
  const int n = p.n, L = d.L;
  const int64_t K = d.K, V = d.V, row0 = p.bh * d.T + p.t0, KP = K + 1;
  const float* S = S_in + (p.bh * d.NC + p.c) * K * V;

  load_rows(q, d, p.b, p.h, p.t0, n, K, 0, int(K), s.q, KP);
  load_rows(k, d, p.b, p.h, p.t0, n, K, 0, int(K), s.k, KP);
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    s.gam[r] = gam[row0 + r];
    s.qe[r] = scale * expf(gam[row0 + r]);
  }
  __syncthreads();
  block_mm_t<T>(
      n, n, int(K), [&](int r, int i) { return s.q[r * KP + i]; },
      [&](int i, int j) { return s.k[j * KP + i]; },
      [&](int r, int j, float qk) {
        s.P[r * L + j] = j <= r ? scale * qk * expf(s.gam[r] - s.gam[j]) : 0.0f;
      });
  for (int64_t c0 = 0; c0 < V; c0 += kVt) {
    const int w = int(V - c0 < kVt ? V - c0 : kVt);
    __syncthreads();  // P complete; the previous tile no longer read
    load_scratch(S, 0, int(K), V, c0, w, s.S, kVs);
    load_scratch(Vn, row0, n, V, c0, w, s.Vn, kVs);
    __syncthreads();
    // O = [scale diag(e) Q | P] [S; Vn]: one product over the concatenated k = (K, then the rows).
    block_mm_t<T>(
        n, w, int(K) + n,
        [&](int r, int kk) {
          return kk < K ? s.qe[r] * s.q[r * KP + kk] : s.P[r * L + (kk - int(K))];
        },
        [&](int kk, int c) { return kk < K ? s.S[kk * kVs + c] : s.Vn[(kk - int(K)) * kVs + c]; },
        [&](int r, int c, float x) {
          o[((p.b * d.T + p.t0 + r) * d.H + p.h) * V + c0 + c] = from_f32<T>(x);
        });
  }
}

template <class T>
void forward_typed(const void* q, const void* k, const void* v, const void* g, const void* beta,
                   bool gate_f32, const void* s0, bool state_f32, float scale, void* o,
                   float* s_final, float* scratch, const Dims& d, cudaStream_t stream) {
  Carve c{scratch};
  const Scratch sc(c, d, false);
  launch_prepare(storage_dtype<T>, k, v, g, beta, gate_f32, d, sc, stream);
  launch_state_fwd(storage_dtype<T>, k, s0, state_f32, d, sc, s_final, stream);
  const int64_t smem = smem_bytes<OutputSmem>(d);
  allow_smem(gdn_output_kernel<T>);
  const dim3 grid(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  gdn_output_kernel<T><<<grid, kThreads, smem, stream>>>(static_cast<const T*>(q),
                                                        static_cast<const T*>(k), sc.gam, sc.Vn,
                                                        sc.S, scale, d, static_cast<T*>(o));
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_prepare(DType t, const void* k, const void* v, const void* g, const void* beta,
                    bool gate_f32, const Dims& d, const Scratch& sc, cudaStream_t stream) {
  const dim3 grid(unsigned(d.NC), unsigned(d.H), unsigned(d.B));
  const int64_t smem = smem_bytes<PrepareSmem>(d);
  if (t == DType::F32) {
    allow_smem(gdn_prepare_kernel<float>);
    gdn_prepare_kernel<float><<<grid, kThreads, smem, stream>>>(
        static_cast<const float*>(k), static_cast<const float*>(v), g, beta, gate_f32, d, sc.gam,
        sc.W, sc.Vn, sc.Tm);
  } else {
    allow_smem(gdn_prepare_kernel<bf16_t>);
    gdn_prepare_kernel<bf16_t><<<grid, kThreads, smem, stream>>>(
        static_cast<const bf16_t*>(k), static_cast<const bf16_t*>(v), g, beta, gate_f32, d, sc.gam,
        sc.W, sc.Vn, sc.Tm);
  }
  AMOR_CUDA_CHECK_LAUNCH();
}

void launch_state_fwd(DType t, const void* k, const void* s0, bool state_f32, const Dims& d,
                      const Scratch& sc, float* s_final, cudaStream_t stream) {
  const dim3 grid(unsigned((d.V + kVt - 1) / kVt), unsigned(d.H), unsigned(d.B));
  const int64_t smem = smem_bytes<StateFwdSmem>(d);
  if (t == DType::F32) {
    allow_smem(gdn_state_fwd_kernel<float>);
    gdn_state_fwd_kernel<float><<<grid, kThreads, smem, stream>>>(
        static_cast<const float*>(k), sc.gam, sc.W, sc.Vn, s0, state_f32, d, sc.S, s_final);
  } else {
    allow_smem(gdn_state_fwd_kernel<bf16_t>);
    gdn_state_fwd_kernel<bf16_t><<<grid, kThreads, smem, stream>>>(
        static_cast<const bf16_t*>(k), sc.gam, sc.W, sc.Vn, s0, state_f32, d, sc.S, s_final);
  }
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace gdn

int64_t gated_delta_max_smem_bytes(const GdnShape& s) {
  using namespace gdn;
  const Dims d = dims_of(s);
  int64_t m = 0;
  for (int64_t b :
       {smem_bytes<PrepareSmem>(d), smem_bytes<StateFwdSmem>(d), smem_bytes<OutputSmem>(d),
        smem_bytes<StateBwdSmem>(d), smem_bytes<BwdQkSmem>(d), smem_bytes<BwdWySmem>(d)})
    m = b > m ? b : m;
  return m;
}

int64_t gated_delta_forward_scratch_floats(const GdnShape& s) {
  gdn::Carve c{nullptr};
  gdn::Scratch sc(c, gdn::dims_of(s), false);
  return c.used;
}

int64_t gated_delta_backward_scratch_floats(const GdnShape& s) {
  gdn::Carve c{nullptr};
  gdn::Scratch sc(c, gdn::dims_of(s), true);
  return c.used;
}

void gated_delta_forward(DType t, const void* q, const void* k, const void* v, const void* g,
                         const void* beta, bool gate_f32, const void* s0, bool state_f32,
                         float scale, void* o, float* s_final, float* scratch, const GdnShape& s,
                         cudaStream_t stream) {
  const gdn::Dims d = gdn::dims_of(s);
  if (t == DType::F32)
    gdn::forward_typed<float>(q, k, v, g, beta, gate_f32, s0, state_f32, scale, o, s_final, scratch,
                              d, stream);
  else
    gdn::forward_typed<bf16_t>(q, k, v, g, beta, gate_f32, s0, state_f32, scale, o, s_final,
                               scratch, d, stream);
}

}  // namespace amor::cuda
