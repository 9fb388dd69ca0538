// Mamba2 SSD scan on the GPU, forward: the chunked algorithm of ssd_chunked_ref.h, laid out as
// mamba_ssm's Triton kernels (chunk cumsum, chunk state, state passing, chunk scan). Per batch b,
// head h (group g = h / (H/G)), a_t = dt_t A, chunks of Q steps:
//
//   (0) cumsum        cum_i = a_{cQ} + ... + a_{cQ+i}                    one block per chunk
//   (1) chunk state   R_c = sum_j exp(cum_last - cum_j) dt_j x_j B_j^T   one block per chunk
//   (2) state passing S_0 = h0, S_{c+1} = exp(cum_last) S_c + R_c        one thread per (b,h,p,n)
//   (3) chunk scan    y_i = sum_{j<=i} (C_i.B_j) exp(cum_i - cum_j) dt_j x_j
//                         + exp(cum_i) S_c C_i + D x_i                   one block per chunk
//
// Tiling: a block of 256 threads owns one (b, h, chunk); it loads the chunk's rows of x [Q,P]
// and B, C [Q,N] into shared memory as f32 (rows past the sequence's end as zeros) and computes
// the small products there with 4x4 register tiles (ssd_tile.cuh). (3) first forms the masked
// decayed Q x Q matrix M_ij = (C_i.B_j) E_ij dt_j (the "attention-like" part), then y = M x +
// diag(exp(cum)) C S^T + D x in one register tile per output element.
// Memory traffic: x, B, C are read twice (by (1) and (3)), y written once; the f32 chunk states
// [B,H,nc,P,N] are written by (1), read and rewritten by (2) and read by (3): 4 * 4 P N bytes
// per chunk and head, which at Q = 64, P = 64, N = 128 is 2 KiB per step and head against
// 2 * P bytes of bf16 x. The final state is the state after the last chunk (f32).
// bf16 storage runs on tensor cores instead, by spans of m chunks (ssd_state_tc_cuda.cu): (1)
// per span (the span's own contribution, f32), (2) over spans, (3) per span carrying the state in
// registers through its chunks (scan_spans_tc_kernel); the f32 chunk states are never stored, so
// the state traffic drops from 4 x 4 P N bytes per chunk to ~3 x 4 P N / m (m = 8 at the
// presets). Where a state does not fit the register tiles (P N > 64 x 128) or under
// ssd_set_spans(false), the per-chunk tensor-core kernels (1) and (3) of
// ssd_forward_tc_cuda.cu run with the f32 scratch above. The f32 kernels here stay the path of
// f32 inputs (exact to ~1e-7).
#include "kernels/ssd/ssd_mma.cuh"
#include "kernels/ssd/ssd_tile.cuh"

namespace amor::cuda {
namespace ssd {
namespace {

// (0) One block of 256 threads per (b, chunk, 32 heads): the block reads the chunk's dt rows of
// its heads (adjacent threads, adjacent heads) into shared memory, the lanes of warp 0 sum one
// head each over the chunk's steps in order (in shared memory, so that the loads' latency is
// paid once per block, not once per step), and the block writes the sums out along the steps
// (adjacent threads, adjacent steps of one head). Shared memory: [Q][33] floats (the odd row
// stride spreads a column over the banks).
constexpr int kCumHeads = 32;

__global__ void __launch_bounds__(256)
    chunk_cumsum_kernel(Dims k, const float* __restrict__ dt, const float* __restrict__ A,
                        float* __restrict__ cum) {
  extern __shared__ float sdt[];
  const int64_t hb = (k.H + kCumHeads - 1) / kCumHeads;
  const int64_t h0 = (blockIdx.x % hb) * kCumHeads, c = blockIdx.x / hb % k.nc;
  const int64_t b = blockIdx.x / hb / k.nc, t0 = c * k.Q;
  const int L = int(k.T - t0 < k.Q ? k.T - t0 : k.Q);
  const int nh = int(k.H - h0 < kCumHeads ? k.H - h0 : kCumHeads), ld = kCumHeads + 1;
  for (int e = threadIdx.x; e < L * kCumHeads; e += blockDim.x) {
    const int i = e / kCumHeads, hh = e % kCumHeads;
    if (hh < nh) sdt[i * ld + hh] = dt[(b * k.T + t0 + i) * k.H + h0 + hh];
  }
  __syncthreads();
  if (threadIdx.x < nh) {
    const int hh = int(threadIdx.x);
    const float a = A[h0 + hh];
    float acc = 0.0f;
    for (int i = 0; i < L; ++i) {
      acc += sdt[i * ld + hh] * a;
      sdt[i * ld + hh] = acc;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < nh * L; e += blockDim.x) {
    const int hh = e / L, i = e % L;
    cum[(b * k.H + h0 + hh) * k.T + t0 + i] = sdt[i * ld + hh];
  }
}

// (1), and the backward's (3'): out = sum_i wt_i u_i v_i^T over one chunk, [P, N].
// Shared memory: us [Q][P+1] (u rows scaled by wt), vs [Q][N+1].
template <class T>
__global__ void __launch_bounds__(kThreads)
    chunk_outer_kernel(Dims k, const T* __restrict__ u, const T* __restrict__ v,
                       const float* __restrict__ dt, const float* __restrict__ cum, bool to_end,
                       float* __restrict__ out) {
  extern __shared__ float smem[];
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N);
  float* us = smem;
  float* vs = us + Q * (P + 1);
  float* wt = vs + Q * (N + 1);
  const float* cm = cum + ch.bh * k.T + ch.t0;
  for (int i = threadIdx.x; i < ch.len; i += blockDim.x) {
    wt[i] = to_end ? expf(cm[ch.len - 1] - cm[i]) * dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h]
                   : expf(cm[i]);
  }
  load_rows(us, u, ch.b, ch.h, ch.t0, ch.len, ch.len, k.T, k.H, P);
  load_rows(vs, v, ch.b, ch.g, ch.t0, ch.len, ch.len, k.T, k.G, N);
  __syncthreads();
  for (int e = threadIdx.x; e < ch.len * P; e += blockDim.x) us[(e / P) * (P + 1) + e % P] *= wt[e / P];
  __syncthreads();
  float* o = out + (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  for_tiles(P, N, [&](Tile& tile) {
    tile.mac(SMat{us, 1, P + 1}, SMat{vs, N + 1, 1}, ch.len);  // A(p, i) = us[i][p]
    tile.each([&](int p, int n, float val) { o[p * N + n] = val; });
  });
}

// (2) One thread per (b, h, p, n) element of the state, sequential over chunks. The loads of
// kAhead chunks are issued before their recurrence steps, so that each thread keeps several
// loads in flight (a long sequence has few (b, h) and many chunks); same order of operations.
constexpr int kAhead = 8;

__global__ void state_passing_kernel(Dims k, const float* __restrict__ cum,
                                     const float* __restrict__ h0, float* __restrict__ states,
                                     float* __restrict__ hT) {
  const int64_t PN = k.P * k.N;
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= PN) return;
  const int64_t bh = blockIdx.y;
  float s = h0 ? h0[bh * PN + e] : 0.0f;
  float* st = states + bh * k.nc * PN + e;
  for (int64_t c0 = 0; c0 < k.nc; c0 += kAhead) {
    float r[kAhead], decay[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c = c0 + u;
      if (c < k.nc) {
        const int64_t last = (c + 1) * k.Q < k.T ? (c + 1) * k.Q - 1 : k.T - 1;
        r[u] = st[c * PN];
        decay[u] = expf(cum[bh * k.T + last]);
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c = c0 + u;
      if (c < k.nc) {
        st[c * PN] = s;
        s = decay[u] * s + r[u];
      }
    }
  }
  if (hT) hT[bh * PN + e] = s;
}

// (3) y of one chunk. Shared memory: Cs [Q][N+1], Ss [max(Q,P)][N+1] (B rows, then the state
// S_c as [P][N+1]), xs [Q][P+1], Ms [Q][Q+1], cum and dt of the chunk.
template <class T>
__global__ void __launch_bounds__(kThreads)
    chunk_scan_kernel(Dims k, const T* __restrict__ x, const float* __restrict__ dt,
                      const T* __restrict__ Bm, const T* __restrict__ Cm,
                      const float* __restrict__ D, const float* __restrict__ cum,
                      const float* __restrict__ states, T* __restrict__ y) {
  extern __shared__ float smem[];
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int QP = Q > P ? Q : P;
  float* Cs = smem;
  float* Ss = Cs + Q * (N + 1);
  float* xs = Ss + QP * (N + 1);
  float* Ms = xs + Q * (P + 1);
  float* cm = Ms + Q * (Q + 1);
  float* dts = cm + Q;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  load_rows(Cs, Cm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N);
  load_rows(Ss, Bm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N);
  load_rows(xs, x, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P);
  __syncthreads();
  // M_ij = (C_i . B_j) exp(cum_i - cum_j) dt_j for j <= i (the exponent is <= 0 there), else 0.
  for_tiles(L, L, [&](Tile& tile) {
    tile.mac(SMat{Cs, N + 1, 1}, SMat{Ss, 1, N + 1}, N);
    tile.each([&](int i, int j, float kij) {
      Ms[i * (Q + 1) + j] = j <= i ? kij * expf(cm[i] - cm[j]) * dts[j] : 0.0f;
    });
  });
  __syncthreads();
  load_state(Ss, states + (ch.bh * k.nc + ch.c) * int64_t(P) * N, P, N);
  __syncthreads();
  const float d = D[ch.h];
  T* yc = y + ((ch.b * k.T + ch.t0) * k.H + ch.h) * P;
  for_tiles(L, P, [&](Tile& tile) {
    tile.mac(SMat{Cs, N + 1, 1}, SMat{Ss, 1, N + 1}, N);  // (C S^T)_ip = sum_n C_in S_pn
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
      const float e = expf(cm[tile.row(i) < L ? tile.row(i) : L - 1]);
#pragma unroll
      for (int j = 0; j < kTN; ++j) tile.acc[i][j] *= e;
    }
    tile.mac(SMat{Ms, Q + 1, 1}, SMat{xs, P + 1, 1}, L);
    tile.each([&](int i, int p, float val) {
      yc[int64_t(i) * k.H * P + p] = from_f32<T>(val + d * xs[i * (P + 1) + p]);
    });
  });
}

int64_t outer_smem(const Dims& k) { return 4 * (k.Q * (k.P + 1) + k.Q * (k.N + 1) + k.Q); }
int64_t scan_smem(const Dims& k) {
  const int64_t qp = k.Q > k.P ? k.Q : k.P;
  return 4 * (k.Q * (k.N + 1) + qp * (k.N + 1) + k.Q * (k.P + 1) + k.Q * (k.Q + 1) + 2 * k.Q);
}

}  // namespace

void launch_chunk_cumsum(const Dims& k, const float* dt, const float* A, float* cum,
                         cudaStream_t s) {
  if (k.B * k.nc * k.H == 0) return;
  const unsigned blocks = unsigned(k.B * k.nc * ceil_div(k.H, kCumHeads));
  const size_t bytes = size_t(4 * k.Q * (kCumHeads + 1));  // <= 17 KiB (Q <= 128)
  chunk_cumsum_kernel<<<blocks, 256, bytes, s>>>(k, dt, A, cum);
  AMOR_CUDA_CHECK_LAUNCH();
}

void launch_chunk_outer(DType t, const Dims& k, const void* u, const void* v, const float* dt,
                        const float* cum, bool to_end, float* out, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  if (t == DType::BF16) {  // tensor cores (ssd_forward_tc_cuda.cu)
    launch_chunk_outer_tc(k, static_cast<const bf16_t*>(u), static_cast<const bf16_t*>(v), dt,
                          cum, to_end, out, s);
    return;
  }
  dispatch_storage(t, "cuda ssd", [&](auto tag) {
    using T = decltype(tag);
    launch_chunks(chunk_outer_kernel<T>, k, outer_smem(k), s, k, static_cast<const T*>(u),
                  static_cast<const T*>(v), dt, cum, to_end, out);
  });
}

void launch_state_passing(const Dims& k, const float* cum, const float* h0, float* states,
                          float* hT, cudaStream_t s) {
  if (k.B * k.H * k.P * k.N == 0) return;
  state_passing_kernel<<<dim3(unsigned(ceil_div(k.P * k.N, 256)), unsigned(k.B * k.H)), 256, 0,
                         s>>>(k, cum, h0, states, hT);
  AMOR_CUDA_CHECK_LAUNCH();
}

namespace {
SsdKernelHook g_hook = nullptr;
}  // namespace

void mark(const char* kernel, cudaStream_t s) {
  if (g_hook) g_hook(kernel, s);
}

int64_t forward_smem(const Dims& k) {
  const int64_t a = outer_smem(k), b = scan_smem(k), c = forward_tc_smem(k);
  const int64_t ab = a > b ? a : b;
  return ab > c ? ab : c;
}

}  // namespace ssd

void ssd_set_kernel_hook(SsdKernelHook hook) { ssd::g_hook = hook; }

int64_t ssd_saved_floats(DType t, const SsdDims& d) {
  const ssd::Dims k = ssd::dims_of(d);
  if (t == DType::BF16 && ssd::use_spans(k)) return ssd::span_saved(k, nullptr).floats;
  return ssd::scratch_floats(k, false);  // the per-chunk paths keep their whole scratch
}

int64_t ssd_forward_scratch_floats(DType t, const SsdDims& d, bool saved) {
  const ssd::Dims k = ssd::dims_of(d);
  if (t == DType::BF16 && ssd::use_spans(k)) {  // cum (unless kept), then the span states
    return (saved ? 0 : k.B * k.H * k.T) +
           k.B * k.H * ceil_div(k.nc, ssd::span_len(k)) * k.P * k.N;
  }
  return saved ? 0 : ssd::scratch_floats(k, false);
}

void ssd_forward(DType t, const SsdDims& d, const void* x, const float* dt, const float* A,
                 const void* Bm, const void* Cm, const float* D, const float* h0, void* y,
                 float* hT, float* scratch, cudaStream_t s, float* saved) {
  using namespace ssd;
  const Dims k = dims_of(d);
  if (t == DType::BF16 && use_spans(k)) {
    // By spans of m chunks (ssd_state_tc_cuda.cu): each span's own state, the pass over spans
    // (slot s <- the state entering span s), then the chunk scan carrying the state through
    // each span. Scratch: cum, then the span states (fewer than the chunk states); with saved,
    // cum goes there instead, and the chunk scan writes every chunk's bf16 state S_c next to it.
    const SpanSaved kept = span_saved(k, saved);
    float* cum = saved ? kept.cum : scratch;
    float* spans = saved ? scratch : scratch + k.B * k.H * k.T;
    const int m = span_len(k);
    mark("start", s);
    launch_chunk_cumsum(k, dt, A, cum, s);
    mark("fwd cumsum", s);
    launch_span_states_tc(k, m, static_cast<const bf16_t*>(x), static_cast<const bf16_t*>(Bm),
                          dt, cum, true, false, nullptr, spans, nullptr, s);
    mark("fwd span_states (x, B)", s);
    launch_span_passing(k, m, cum, h0, spans, hT, false, s);
    mark("fwd span_passing", s);
    launch_scan_spans_tc(k, m, static_cast<const bf16_t*>(x), dt, static_cast<const bf16_t*>(Bm),
                         static_cast<const bf16_t*>(Cm), D, cum, spans, static_cast<bf16_t*>(y),
                         kept.states, s);
    mark(saved ? "fwd scan_spans (S_c kept)" : "fwd scan_spans", s);
    return;
  }
  // The per-chunk paths: with saved, their scratch (cum, the states entering each chunk) is kept.
  const Scratch sc = carve(k, saved ? saved : scratch, false);
  mark("start", s);
  launch_chunk_cumsum(k, dt, A, sc.cum, s);
  mark("fwd cumsum", s);
  launch_chunk_outer(t, k, x, Bm, dt, sc.cum, true, sc.states, s);
  mark("fwd chunk_outer", s);
  launch_state_passing(k, sc.cum, h0, sc.states, hT, s);
  mark("fwd state_passing", s);
  if (k.nc * k.B * k.H == 0) return;
  if (t == DType::BF16) {  // tensor cores (ssd_forward_tc_cuda.cu)
    launch_chunk_scan_tc(k, static_cast<const bf16_t*>(x), dt, static_cast<const bf16_t*>(Bm),
                         static_cast<const bf16_t*>(Cm), D, sc.cum, sc.states,
                         static_cast<bf16_t*>(y), s);
    mark("fwd chunk_scan", s);
    return;
  }
  dispatch_storage(t, "cuda ssd_forward", [&](auto tag) {
    using T = decltype(tag);
    launch_chunks(chunk_scan_kernel<T>, k, scan_smem(k), s, k, static_cast<const T*>(x), dt,
                  static_cast<const T*>(Bm), static_cast<const T*>(Cm), D, sc.cum, sc.states,
                  static_cast<T*>(y));
  });
}

}  // namespace amor::cuda
