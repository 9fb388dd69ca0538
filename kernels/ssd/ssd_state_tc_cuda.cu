// The bf16 SSD path's chunk states, by spans: a block owns m consecutive chunks of one (b, h)
// (a "span", m = span_len(): 8 at the 1.5B presets' sizes) and carries a [P, N] state across
// them in f32 registers (ssd_mma.cuh's state tiles), so the per-chunk f32 states of
// ssd_forward_cuda.cu ([B,H,nc,P,N], 537 MB at 16K tokens, H 64, P 64, N 128, written and read
// four times per forward) become per-span states (m times fewer) plus, in the backward, per-chunk
// bf16 copies written once. The math of ssd_chunked_ref.h, with d_c = exp(cum_last of chunk c):
//
//   forward  S_{c+1} = d_c S_c + R_c,  R_c = sum_j w_j x_j B_j^T,  w_j = exp(cum_last - cum_j) dt_j
//   reverse  G_c = d_c G_{c+1} + dS_c,  dS_c = sum_i exp(cum_i) dy_i C_i^T
//
// span_states (one block per (span, b, h), 256 threads): per chunk of the span in order (reverse:
// last to first), optionally write the carried state as bf16 (the state entering chunk c forward,
// G_{c+1} in reverse), then state <- d_c state + sum_i wt_i u_i v_i^T (mma m16n8k16, K = the
// chunk's steps, A = (wt u)^T: the staged bf16 u tile scaled by wt in place and rounded back to
// bf16, as the per-chunk kernels round their scaled tile). Started from zero it gives the span's
// own contribution (R of a span); started from the state entering the span it materialises every
// chunk's state.
// span_passing: the sequential pass over spans (one thread per (b, h, p, n), as
// ssd_forward_cuda.cu's state passing over chunks), in place: slot s <- the state entering span s
// (reverse: the gradient of span s's end state); the decay of a span is exp(sum of its d_c's logs).
//
// Shared memory: up to four stages of a u tile Q (P+8) and a v tile Q (N+8) bf16 plus the
// chunk's cum and dt: 106 KiB at the presets; 118 registers (__launch_bounds__(256, 2): two
// blocks per SM). A chunk's product is short, so the copies run three chunks ahead.
// Memory traffic per span_states call: u and v read once (bf16), f32 span states of m chunks
// (P N 4 bytes) read and/or written once, and bf16 chunk states (P N 2 bytes per chunk) when
// materialised.
#include <algorithm>

#include "kernels/cast/cuda_device.cuh"
#include "kernels/core/env_switch.h"
#include "kernels/ssd/ssd_mma.cuh"

namespace amor::cuda {
namespace ssd {
namespace {

using tc::kLog2e;
using tc::pad16;
using tc::stride_of;
using tc::tile_bytes;
using tc::WarpTile;

// See the file comment. init [B,H,ns,P,N] f32 or null (zeros); out_spans [B,H,ns,P,N] f32 or
// null; out_chunks [B,H,nc,P,N] bf16 or null. A chunk's product is short (K = Q), so one chunk of
// copies in flight would leave the block waiting on memory: S stages of buffers (u and v tiles,
// the chunk's cum and dt), with the copies of chunks q + 1 .. q + S - 1 in flight (cp.async, one
// commit group per chunk, empty past the span) while chunk q's product runs. The weights are
// applied to the staged u tile once (scale_rows_bf16; one more barrier per chunk), computed from
// the staged cum and dt (exps as ex2.approx, relative error ~2^-22, below the bf16 rounding of
// the products).
constexpr int kMaxSpanLen = 64;  // ssd_set_span_len's cap

template <int S, class Sh>
__global__ void __launch_bounds__(kThreads, 2)
    span_states_tc_kernel(Dims k, int m, const bf16_t* __restrict__ u,
                          const bf16_t* __restrict__ v, const float* __restrict__ dt,
                          const float* __restrict__ cum, bool to_end, bool reverse,
                          const float* __restrict__ init, float* __restrict__ out_spans,
                          bf16_t* __restrict__ out_chunks) {
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  Sh::fix(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), Qp = pad16(Q);
  const Chunk head = chunk_of_block(k);  // (b, h, g) of blockIdx.y; blockIdx.x is the span
  const int64_t sp = blockIdx.x, bh = head.bh, b = head.b, h = head.h, g = head.g;
  const int64_t ns = (int(k.nc) + m - 1) / m;
  const int64_t c0 = sp * m, c1 = c0 + m < k.nc ? c0 + m : k.nc;
  const int n = int(c1 - c0);
  const int su = stride_of(P), sv = stride_of(N);
  const int64_t ubytes = tile_bytes(Q, P), vbytes = tile_bytes(Q, N);
  const int64_t stage = ubytes + vbytes + 8 * Qp;
  // Stage `at` (computed, not indexed arrays of pointers, which would live in local memory).
  auto us = [&](int at) { return reinterpret_cast<bf16_t*>(smem + at * stage); };
  auto vs = [&](int at) { return reinterpret_cast<bf16_t*>(smem + at * stage + ubytes); };
  auto cms = [&](int at) {
    return reinterpret_cast<float*>(smem + at * stage + ubytes + vbytes);
  };
  auto dts = [&](int at) { return cms(at) + Qp; };
  auto chunk_of = [&](int q) { return reverse ? c1 - 1 - q : c0 + q; };
  auto len_of = [&](int64_t c) { return Sh::len(k, c * k.Q); };
  // Chunk q's tiles and per-step scalars (zero past the chunk) into stage q % S; one commit
  // group, empty for q >= n.
  auto issue = [&](int q) {
    if (q < n) {
      const int at = q % S, i = int(threadIdx.x);
      const int64_t c = chunk_of(q), t0 = c * k.Q;
      const int L = len_of(c);
      tc::load_rows_async(us(at), su, u, b, h, t0, L, k.T, k.H, P);
      tc::load_rows_async(vs(at), sv, v, b, g, t0, L, k.T, k.G, N);
      if (i < Qp) {
        const int64_t t = t0 + (i < L ? i : 0);
        mma::cp_async_4(cms(at) + i, cum + bh * k.T + t, i < L);
        if (to_end) mma::cp_async_4(dts(at) + i, dt + (b * k.T + t) * k.H + h, i < L);
      }
    }
    mma::cp_async_commit();
  };
  bool live;
  WarpTile<2, 2> st = tc::state_tile(P, N, live);
  const int64_t span_at = (bh * ns + sp) * int64_t(P) * N;
  for (int q = 0; q < S - 1; ++q) issue(q);
  if (live) tc::state_load(st, init ? init + span_at : nullptr, P, N);
  for (int q = 0; q < n; ++q) {
    mma::cp_async_wait<S - 2>();
    __syncthreads();  // chunk q's stage is in; chunk q - 1's stage is free
    issue(q + S - 1);
    const int at = q % S;
    const int64_t c = chunk_of(q);
    const int L = len_of(c);
    const float* cm = cms(at);
    const float* dtq = dts(at);
    const float cl = cm[L - 1] * kLog2e;
    // u_i <- w_i u_i in the stage, w_i = exp(cum_last - cum_i) dt_i (to_end) or exp(cum_i); the
    // rows past the chunk are zero already.
    tc::scale_rows_bf16(us(at), su, L, P, [&](int i) {
      return to_end ? mma::exp2_approx(cl - cm[i] * kLog2e) * dtq[i]
                    : mma::exp2_approx(cm[i] * kLog2e);
    });
    __syncthreads();  // the scaled u is in
    if (live) {
      if (out_chunks) {  // through this warp's staging tile, after the S stages
        bf16_t* stg = reinterpret_cast<bf16_t*>(smem + S * stage) +
                      (int(threadIdx.x) / 32) * 32 * tc::kStageRow;
        tc::state_store_bf16_staged(st, stg, out_chunks + (bh * k.nc + c) * int64_t(P) * N, N,
                                    P, N);
      }
      const float d = mma::exp2_approx(cl);
      st.each([&](int, int, float& val) { val *= d; });
      st.mac<true, true>(us(at), su, vs(at), sv, 0, pad16(L));  // A(p, i) = u_i[p], B(i, n) = v_i[n]
    }
  }
  if (live && out_spans) tc::state_store(st, out_spans + span_at, P, N);
}

// kVec consecutive (b, h, p, n) elements per thread (4: one float4, where P N % 4 == 0 and the
// arrays are 16-byte aligned), sequential over the spans (reverse: last to first). The block's
// threads share one (b, h): per window of kWindowChunks / m spans (in the pass's order) they first
// load the cum_last of every chunk of the window into shared memory (one chunk per thread, all
// loads in flight at once), then sum each span's chunks in chunk order into its decay (one span
// per thread), so that each thread's pass then waits on its own span loads only, kAhead of them
// in flight at once. Why four elements a thread: the pass moves little (a state in and out per
// span) and each block's preamble (the cum loads, two barriers, the decays) is a few serial
// memory latencies, so with one element a thread (16K blocks at H 64, B 8) the kernel ran at a
// fifth of its bandwidth (92 us for ~84 MB at H 64, B8 T2K, RESULTS.md 2026-12-01); the arithmetic
// per element is unchanged (the same bits).
constexpr int kAhead = 8;
constexpr int kWindowChunks = 1024;  // >= kMaxSpanLen

template <int kVec>
__global__ void span_passing_kernel(Dims k, int m, const float* __restrict__ cum,
                                    const float* __restrict__ first, float* __restrict__ spans,
                                    float* __restrict__ last, bool reverse) {
  __shared__ float logs[kWindowChunks], decays[kWindowChunks];
  const int window = kWindowChunks / m;
  const int64_t PN = k.P * k.N, ns = (k.nc + m - 1) / m;
  const int64_t bh = blockIdx.y, e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  const bool mine = e < PN;  // (every thread takes part in the barriers; P N % kVec == 0)
  float s[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) s[i] = 0.0f;
  if (mine && first) load_vec<float, kVec>(first + bh * PN + e, s);
  float* sl = spans + bh * ns * PN + e;
  for (int64_t w0 = 0; w0 < ns; w0 += window) {
    const int wn = int(ns - w0 < window ? ns - w0 : window);
    // The window's spans are sp_lo .. sp_lo + wn - 1 in index order, whichever the direction.
    const int64_t sp_lo = reverse ? ns - w0 - wn : w0;
    const int64_t cl0 = sp_lo * m, cl1 = (sp_lo + wn) * m < k.nc ? (sp_lo + wn) * m : k.nc;
    __syncthreads();  // the previous window's decays are used up
    for (int64_t c = cl0 + threadIdx.x; c < cl1; c += blockDim.x) {
      const int64_t lst = (c + 1) * k.Q < k.T ? (c + 1) * k.Q - 1 : k.T - 1;
      logs[c - cl0] = cum[bh * k.T + lst];
    }
    __syncthreads();
    for (int a = threadIdx.x; a < wn; a += blockDim.x) {
      const int64_t sp = reverse ? ns - 1 - (w0 + a) : w0 + a;
      const int64_t c1 = (sp + 1) * m < k.nc ? (sp + 1) * m : k.nc;
      float logd = 0.0f;
      for (int64_t c = sp * m; c < c1; ++c) logd += logs[c - cl0];
      decays[a] = expf(logd);
    }
    __syncthreads();
    if (!mine) continue;
    for (int q0 = 0; q0 < wn; q0 += kAhead) {
      float r[kAhead][kVec];
#pragma unroll
      for (int a = 0; a < kAhead; ++a) {
        const int64_t q = w0 + q0 + a, sp = reverse ? ns - 1 - q : q;
        if (q0 + a < wn) load_vec<float, kVec>(sl + sp * PN, r[a]);
      }
#pragma unroll
      for (int a = 0; a < kAhead; ++a) {
        const int64_t q = w0 + q0 + a, sp = reverse ? ns - 1 - q : q;
        if (q0 + a < wn) {
          store_vec<float, kVec>(sl + sp * PN, s);
#pragma unroll
          for (int i = 0; i < kVec; ++i) s[i] = decays[q0 + a] * s[i] + r[a][i];
        }
      }
    }
  }
  if (mine && last) store_vec<float, kVec>(last + bh * PN + e, s);
}

// Stages of span_states_tc_kernel: 4 where they fit two blocks per SM (113 KiB each: 4 x 26 KiB
// at Q = 64, P = 64, N = 128), else 3, else 2.
int64_t span_stage_bytes(const Dims& k) {
  return tile_bytes(k.Q, k.P) + tile_bytes(k.Q, k.N) + 8 * pad16(int(k.Q));
}
// staged: the call materialises chunk states (out_chunks), which go through per-warp staging
// tiles (tc::kStagingBytes, 20 KiB) after the stages: 3 stages then fit two blocks per SM.
int g_span_stages = 0;  // ssd_set_span_stages: 2..4, or 0 for span_stages' choice
int span_stages(const Dims& k, bool staged) {
  const int64_t extra = staged ? tc::kStagingBytes : 0;
  if (g_span_stages >= 2 && g_span_stages * span_stage_bytes(k) + extra <= kSsdMaxSmemBytes) {
    return g_span_stages;
  }
  const int64_t two_per_sm = 113 * 1024 - extra;
  return 4 * span_stage_bytes(k) <= two_per_sm ? 4 : 3 * span_stage_bytes(k) <= two_per_sm ? 3 : 2;
}
int64_t span_states_smem(const Dims& k, bool staged) {
  return span_stages(k, staged) * span_stage_bytes(k) + (staged ? tc::kStagingBytes : 0);
}

}  // namespace

namespace {
bool g_spans_on = true;
// Chunks per span when > 0 (ssd_set_span_len), else span_len's choice; -1 until the first span
// launch reads the starting value from AMOR_SSD_SPAN_LEN (0 to kMaxSpanLen, unset: 0). Read
// then rather than at static initialisation, where a refused value could not be reported.
int g_span_len = -1;
}  // namespace

bool spans_on() { return g_spans_on; }

int span_len(const Dims& k) {
  if (g_span_len < 0) g_span_len = env_int("AMOR_SSD_SPAN_LEN", 0, kMaxSpanLen, 0);
  if (g_span_len > 0) return g_span_len < kMaxSpanLen ? g_span_len : kMaxSpanLen;
  // 16 chunks per block where that still leaves >= 1024 blocks (8 per SM on 132 SMs), else
  // fewer; never below 2 (so the small tests cover spans of several chunks). 16 rather than 8:
  // fwd+bwd 5-7% faster at H 64, T 2K and 16K (bench-ssd --kernels, H200, 2026-12-01 session 2).
  int m = 16;
  while (m > 2 && k.B * k.H * ceil_div(k.nc, m) < 1024) m /= 2;
  return m;
}

bool spans_fit(const Dims& k) { return tc::state_fits(int(k.P), int(k.N)); }

void launch_span_states_tc(const Dims& k, int m, const bf16_t* u, const bf16_t* v,
                           const float* dt, const float* cum, bool to_end, bool reverse,
                           const float* init, float* out_spans, bf16_t* out_chunks,
                           cudaStream_t s) {
  const int64_t ns = ceil_div(k.nc, m);
  if (ns * k.B * k.H == 0) return;
  const bool staged = out_chunks != nullptr;
  const int64_t bytes = span_states_smem(k, staged);
  auto run = [&](auto kernel) {
    AMOR_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    kernel<<<dim3(unsigned(ns), unsigned(k.B * k.H)), kThreads, size_t(bytes), s>>>(
        k, m, u, v, dt, cum, to_end, reverse, init, out_spans, out_chunks);
    AMOR_CUDA_CHECK_LAUNCH();
  };
  with_shape(k, [&](auto sh) {
    using Sh = decltype(sh);
    switch (span_stages(k, staged)) {
      case 4: run(span_states_tc_kernel<4, Sh>); break;
      case 3: run(span_states_tc_kernel<3, Sh>); break;
      default: run(span_states_tc_kernel<2, Sh>); break;
    }
  });
}

void launch_span_passing(const Dims& k, int m, const float* cum, const float* first,
                         float* spans, float* last, bool reverse, cudaStream_t s) {
  if (k.B * k.H * k.P * k.N == 0) return;
  const bool vec4 = k.P * k.N % 4 == 0 && aligned16(spans) && aligned16(first) && aligned16(last);
  if (vec4) {
    span_passing_kernel<4><<<dim3(unsigned(ceil_div(k.P * k.N / 4, 256)), unsigned(k.B * k.H)),
                             256, 0, s>>>(k, m, cum, first, spans, last, reverse);
  } else {
    span_passing_kernel<1><<<dim3(unsigned(ceil_div(k.P * k.N, 256)), unsigned(k.B * k.H)), 256,
                             0, s>>>(k, m, cum, first, spans, last, reverse);
  }
  AMOR_CUDA_CHECK_LAUNCH();
}

int64_t span_smem(const Dims& k) {
  const int64_t a = span_states_smem(k, false), b = span_states_smem(k, true);
  return a > b ? a : b;
}

}  // namespace ssd

void ssd_set_spans(bool on) { ssd::g_spans_on = on; }

void ssd_set_span_len(int m) { ssd::g_span_len = m > 0 ? m : 0; }

void ssd_set_span_stages(int stages) {
  ssd::g_span_stages = stages >= 2 && stages <= 4 ? stages : 0;
}

}  // namespace amor::cuda
