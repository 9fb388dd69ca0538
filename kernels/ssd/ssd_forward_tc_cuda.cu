// Mamba2 SSD scan forward on tensor cores, for bf16 storage: the chunk outer products (the chunk
// states, and the backward's state gradients) and the chunk scan of ssd_forward_cuda.cu with the
// same math, blocks (one per (b, h, chunk), 256 threads) and scratch; f32 inputs keep the SIMT
// kernels there. The cumsum, the decays and the state passing stay f32.
//
// Per chunk of Q steps (Q = 64, P = 64, N = 128 at the 1.5B presets), with the operands as bf16
// tiles in shared memory (ssd_mma.cuh) and f32 accumulation in mma m16n8k16:
//   chunk outer  R[P, N] = (w x)^T B        A = (w x)^T (w_i x_i rounded to bf16), K = Q
//   chunk scan   K[Q, Q] = C B^T            K = N, then M_ij = K_ij exp(cum_i - cum_j) dt_j on
//                                           j <= i, rounded to bf16
//                y[Q, P] = diag(exp(cum)) C S^T + M x + D x
//                                           K = N (S_c rounded to bf16), then K = Q over the
//                                           causal part only (column tiles up to the row tile)
// bf16 rounding of the decay-weighted operands (w x, M, S) costs ~2e-3 relative (the scan's
// bf16 tolerance is 2e-2, the output's 5e-3); everything else is f32.
//
// Shared memory (bf16, rows padded to pad16(W) + 8): scan Q (N+8) + max(Q, P) (N+8) + Q (P+8)
// + Q (Q+8) elements = 52.5 KiB at the presets (3 blocks per SM, bound by its 77 registers; the
// f32 kernel's 97.5 KiB fit two), outer Q (P+8) + Q (N+8) = 26 KiB. Memory traffic as the f32
// kernels', with half the bytes for x, B, C.
//
// scan_spans_tc_kernel (the default bf16 path, see ssd_state_tc_cuda.cu) runs the same chunk scan
// for the m chunks of a span with the state in registers; per chunk it reads x, B, C once (bf16)
// and writes y; per span it reads one f32 state. Shared memory: two buffers of the C, B, x tiles
// (the next chunk's copied in while this one computes), the S and M tiles: 113 KiB at the
// presets, two blocks per SM (128 registers). Its per-step scalars (cum, dt) come in by cp.async
// with the tiles; its exps are ex2.approx (one instruction; relative error ~2^-22, far below the
// bf16 rounding of what they scale), and y leaves as bf16 pairs: the kernel is bound by the
// issue of its non-MMA instructions, so these count.
#include "kernels/ssd/ssd_mma.cuh"

namespace amor::cuda {
namespace ssd {
namespace {

using tc::kLog2e;
using tc::pad16;
using tc::stride_of;
using tc::tile_bytes;
using tc::WarpTile;

// out[b,h,c] [P, N] f32 = sum_i wt_i u_i v_i^T (see launch_chunk_outer in ssd_tile.cuh).
__global__ void __launch_bounds__(kThreads)
    chunk_outer_tc_kernel(Dims k, const bf16_t* __restrict__ u, const bf16_t* __restrict__ v,
                          const float* __restrict__ dt, const float* __restrict__ cum,
                          bool to_end, float* __restrict__ out) {
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem_tc = reinterpret_cast<unsigned char*>(smem_raw);
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int su = stride_of(P), sv = stride_of(N);
  bf16_t* us = reinterpret_cast<bf16_t*>(smem_tc);
  bf16_t* vs = reinterpret_cast<bf16_t*>(smem_tc + tile_bytes(Q, P));
  float* wt = reinterpret_cast<float*>(smem_tc + tile_bytes(Q, P) + tile_bytes(Q, N));
  const float* cm = cum + ch.bh * k.T + ch.t0;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    wt[i] = to_end ? expf(cm[L - 1] - cm[i]) * dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h]
                   : expf(cm[i]);
  }
  __syncthreads();
  tc::load_rows_bf16(us, su, u, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P, wt);
  tc::load_rows_bf16(vs, sv, v, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  __syncthreads();
  float* o = out + (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  tc::for_warp_tiles<2, 2>(pad16(P), pad16(N), [&](int m0, int n0) {
    WarpTile<2, 2> t(m0, n0, pad16(P), pad16(N));
    t.mac<true, true>(us, su, vs, sv, 0, pad16(L));  // A(p, i) = us[i][p], B(i, n) = vs[i][n]
    t.each([&](int p, int n, float& val) {
      if (p < P && n < N) o[p * N + n] = val;
    });
  });
}

// y of one chunk (step (3) of ssd_forward_cuda.cu).
__global__ void __launch_bounds__(kThreads)
    chunk_scan_tc_kernel(Dims k, const bf16_t* __restrict__ x, const float* __restrict__ dt,
                         const bf16_t* __restrict__ Bm, const bf16_t* __restrict__ Cm,
                         const float* __restrict__ D, const float* __restrict__ cum,
                         const float* __restrict__ states, bf16_t* __restrict__ y) {
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem_tc = reinterpret_cast<unsigned char*>(smem_raw);
  const Chunk ch = chunk_of_block(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), L = ch.len;
  const int QP = Q > P ? Q : P;
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  unsigned char* at = smem_tc;
  bf16_t* Cs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, N);
  bf16_t* BS = reinterpret_cast<bf16_t*>(at);  // B rows, then the state S_c as [P][N]
  at += tile_bytes(QP, N);
  bf16_t* xs = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, P);
  bf16_t* Ms = reinterpret_cast<bf16_t*>(at);
  at += tile_bytes(Q, Q);
  float* cm = reinterpret_cast<float*>(at);
  float* dts = cm + Q;
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    cm[i] = cum[ch.bh * k.T + ch.t0 + i];
    dts[i] = dt[(ch.b * k.T + ch.t0 + i) * k.H + ch.h];
  }
  tc::load_rows_bf16(Cs, sN, Cm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  tc::load_rows_bf16(BS, sN, Bm, ch.b, ch.g, ch.t0, L, L, k.T, k.G, N, nullptr);
  tc::load_rows_bf16(xs, sP, x, ch.b, ch.h, ch.t0, L, L, k.T, k.H, P, nullptr);
  __syncthreads();
  const int Lp = pad16(L), Pp = pad16(P), Np = pad16(N);
  // M_ij = (C_i . B_j) exp(cum_i - cum_j) dt_j for j <= i (the exponent is <= 0 there), else 0,
  // over the whole Lp x Lp tile (the padding must be zero for the product below).
  tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
    WarpTile<1, 2> t(m0, n0, Lp, Lp);
    if (n0 <= m0 + 15) t.mac<false, false>(Cs, sN, BS, sN, 0, Np);  // else all above the diagonal
    t.each([&](int i, int j, float& kij) {
      const float m = j <= i && i < L ? kij * expf(cm[i] - cm[j]) * dts[j] : 0.0f;
      Ms[i * sQ + j] = from_f32<bf16_t>(m);
    });
  });
  __syncthreads();
  const float* Sc = states + (ch.bh * k.nc + ch.c) * int64_t(P) * N;
  tc::load_state_bf16(BS, sN, Sc, P, N, nullptr);
  __syncthreads();
  const float d = D[ch.h];
  bf16_t* yc = y + ((ch.b * k.T + ch.t0) * k.H + ch.h) * P;
  tc::for_warp_tiles<1, 2>(Lp, Pp, [&](int m0, int n0) {
    WarpTile<1, 2> t(m0, n0, Lp, Pp);
    t.mac<false, false>(Cs, sN, BS, sN, 0, Np);  // (C S^T)_ip = sum_n C_in S_pn
    t.each([&](int i, int, float& v) { v *= expf(cm[i < L ? i : L - 1]); });
    t.mac<false, true>(Ms, sQ, xs, sP, 0, m0 + 16);  // sum_{j <= i} M_ij x_jp
    t.each([&](int i, int p, float& v) {
      if (i < L && p < P) {
        yc[int64_t(i) * k.H * P + p] = from_f32<bf16_t>(v + d * to_f32(xs[i * sP + p]));
      }
    });
  });
}

// y of the m chunks of one span (b, h, s), in order, carrying the state S_c in f32 registers
// (ssd_mma.cuh's state tiles) from spans[b,h,s] (the state entering the span): per chunk, the
// chunk scan above with S_c from the registers (rounded to bf16 into a tile, as the per-chunk
// kernel rounds the f32 state it loads), then S_{c+1} = exp(cum_last) S_c + (w x)^T B (w applied
// to the x fragments: mac_scaled_rows). The C, B, x tiles and the per-step scalars of chunk
// q + 1 are loaded (cp.async) into the other of two buffers while chunk q computes; two
// barriers per chunk.
template <class Sh>
__global__ void __launch_bounds__(kThreads, 2)
    scan_spans_tc_kernel(Dims k, int m, const bf16_t* __restrict__ x,
                         const float* __restrict__ dt, const bf16_t* __restrict__ Bm,
                         const bf16_t* __restrict__ Cm, const float* __restrict__ D,
                         const float* __restrict__ cum, const float* __restrict__ spans,
                         bf16_t* __restrict__ y, bf16_t* __restrict__ out_chunks) {
  extern __shared__ uint4 smem_raw[];
  Sh::fix(k);
  const int Q = int(k.Q), P = int(k.P), N = int(k.N), Qp = pad16(Q);
  const Chunk head = chunk_of_block(k);  // (b, h, g) of blockIdx.y; blockIdx.x is the span
  const int64_t sp = blockIdx.x, bh = head.bh, b = head.b, h = head.h, g = head.g;
  const int64_t ns = (int(k.nc) + m - 1) / m;
  const int64_t c0 = sp * m, c1 = c0 + m < k.nc ? c0 + m : k.nc;
  const int n = int(c1 - c0);
  const int sN = stride_of(N), sP = stride_of(P), sQ = stride_of(Q);
  const int Pp = pad16(P), Np = pad16(N);
  // Layout: buffers 0 and 1 of (C, B, x), then Ss, Ms, then the scalars (cm, dts) x 2: 113 KiB
  // at the presets, exactly two blocks per SM (228 KiB less 1 KiB per block).
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  const int64_t cbytes = tile_bytes(Q, N), xbytes = tile_bytes(Q, P);
  const int64_t buf = 2 * cbytes + xbytes;
  auto Cs = [&](int q) { return reinterpret_cast<bf16_t*>(smem + (q & 1) * buf); };
  auto Bs = [&](int q) { return reinterpret_cast<bf16_t*>(smem + (q & 1) * buf + cbytes); };
  auto xs = [&](int q) { return reinterpret_cast<bf16_t*>(smem + (q & 1) * buf + 2 * cbytes); };
  bf16_t* Ss = reinterpret_cast<bf16_t*>(smem + 2 * buf);  // S_c as [P][N]
  bf16_t* Ms = reinterpret_cast<bf16_t*>(smem + 2 * buf + tile_bytes(P, N));
  float* scal = reinterpret_cast<float*>(smem + 2 * buf + tile_bytes(P, N) + tile_bytes(Q, Q));
  auto cm = [&](int q) { return scal + (q & 1) * 2 * Qp; };
  auto dts = [&](int q) { return scal + (q & 1) * 2 * Qp + Qp; };
  auto len_of = [&](int q) { return Sh::len(k, (c0 + q) * k.Q); };
  // Chunk q's tiles and per-step scalars (cum and dt, zero past the chunk) into buffer q % 2,
  // one commit group.
  auto issue = [&](int q) {
    const int64_t t0 = (c0 + q) * k.Q;
    const int L = len_of(q), i = int(threadIdx.x);
    tc::load_rows_async(Cs(q), sN, Cm, b, g, t0, L, k.T, k.G, N);
    tc::load_rows_async(Bs(q), sN, Bm, b, g, t0, L, k.T, k.G, N);
    tc::load_rows_async(xs(q), sP, x, b, h, t0, L, k.T, k.H, P);
    if (i < Qp) {
      mma::cp_async_4(cm(q) + i, cum + bh * k.T + t0 + (i < L ? i : 0), i < L);
      mma::cp_async_4(dts(q) + i, dt + (b * k.T + t0 + (i < L ? i : 0)) * k.H + h, i < L);
    }
    mma::cp_async_commit();
  };
  // Each exp below is one ex2.approx (tc::kLog2e).
  bool live;
  WarpTile<2, 2> st = tc::state_tile(P, N, live);
  if (n > 0) issue(0);
  if (live) tc::state_load(st, spans + (bh * ns + sp) * int64_t(P) * N, P, N);
  const float d = D[h];
  const int lane = int(threadIdx.x) % 32, lr = lane / 4, tq = lane % 4;
  // y stores two neighbouring columns as one bf16 pair where every row starts 4-byte aligned.
  const bool pairs = P % 2 == 0;
  for (int q = 0; q < n; ++q) {
    mma::cp_async_wait<0>();
    __syncthreads();  // chunk q's tiles and scalars are in; chunk q - 1's buffers are free
    if (q + 1 < n) issue(q + 1);
    const int64_t t0 = (c0 + q) * k.Q;
    const int L = len_of(q), Lp = pad16(L);
    const bf16_t *C = Cs(q), *Bt = Bs(q), *X = xs(q);
    const float *cmq = cm(q), *dtq = dts(q);
    if (live) tc::state_store_bf16(st, Ss, sN, Pp, Np);
    // M_ij = (C_i . B_j) exp(cum_i - cum_j) dt_j for j <= i < L, else 0 (also in the padding,
    // which the product below runs over), rounded to bf16; a warp tile wholly above the
    // diagonal skips the product. Column pairs (2 tq, 2 tq + 1) of each n8 tile, one store.
    tc::for_warp_tiles<1, 2>(Lp, Lp, [&](int m0, int n0) {
      WarpTile<1, 2> t(m0, n0, Lp, Lp);
      if (n0 <= m0 + 15) t.mac<false, false>(C, sN, Bt, sN, 0, Np);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = m0 + lr + 8 * r;
        const float ci = cmq[i] * kLog2e;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = n0 + 8 * j + 2 * tq;  // even, as Lp: c < Lp implies c + 1 < Lp
          if (c >= Lp) continue;
          const float m0v = c <= i && i < L
                                ? t.c[0][j][2 * r] * mma::exp2_approx(ci - cmq[c] * kLog2e) * dtq[c]
                                : 0.0f;
          const float m1v = c + 1 <= i && i < L
                                ? t.c[0][j][2 * r + 1] *
                                      mma::exp2_approx(ci - cmq[c + 1] * kLog2e) * dtq[c + 1]
                                : 0.0f;
          *reinterpret_cast<uint32_t*>(Ms + i * sQ + c) = mma::pack_bf16x2(m0v, m1v);
        }
      }
    });
    // The state update's row weights w_i = exp(cum_last - cum_i) dt_i (zero past the chunk), one
    // exp per row instead of one per fragment and k step, kept as a float in row i's padding of
    // the x tile: columns pad16(P) .. pad16(P) + 7 are neither copied into (load_rows_async
    // stops at pad16(P)) nor read by the fragment loads (K runs to pad16(P)).
    {
      const float cl = cmq[L - 1] * kLog2e;
      bf16_t* xw = xs(q);
      for (int i = int(threadIdx.x); i < Lp; i += kThreads) {
        *reinterpret_cast<float*>(xw + i * sP + Pp) =
            i < L ? mma::exp2_approx(cl - cmq[i] * kLog2e) * dtq[i] : 0.0f;
      }
    }
    __syncthreads();
    // Kept for the backward (out_chunks): S_c as the bf16 tile Ss holds it (the state entering
    // chunk c rounded to bf16, the bits of span_states' materialised chunk states: the same
    // carried f32 state, the same rounding), 16 bytes a piece where rows allow. Ss is complete
    // after the barrier above and rewritten only after the next chunk's first barrier.
    if (out_chunks) {
      bf16_t* oc = out_chunks + (bh * k.nc + c0 + q) * int64_t(P) * N;
      if (N % 8 == 0 && (reinterpret_cast<uintptr_t>(out_chunks) & 15u) == 0) {
        const int per = N / 8;
        for (int e = int(threadIdx.x); e < P * per; e += kThreads) {
          const int r = e / per, c = 8 * (e % per);
          *reinterpret_cast<uint4*>(oc + int64_t(r) * N + c) =
              *reinterpret_cast<const uint4*>(Ss + r * sN + c);
        }
      } else {
        for (int e = int(threadIdx.x); e < P * N; e += kThreads) oc[e] = Ss[(e / N) * sN + e % N];
      }
    }
    // y_i = exp(cum_i) (C S^T)_i + sum_{j <= i} M_ij x_j + D x_i, for the rows i < L.
    bf16_t* yc = y + ((b * k.T + t0) * k.H + h) * P;
    tc::for_warp_tiles<1, 2>(Lp, Pp, [&](int m0, int n0) {
      WarpTile<1, 2> t(m0, n0, Lp, Pp);
      t.mac<false, false>(C, sN, Ss, sN, 0, Np);  // (C S^T)_ip = sum_n C_in S_pn
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float e = mma::exp2_approx(cmq[m0 + lr + 8 * r] * kLog2e);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          t.c[0][j][2 * r] *= e;
          t.c[0][j][2 * r + 1] *= e;
        }
      }
      t.mac<false, true>(Ms, sQ, X, sP, 0, m0 + 16);  // sum_{j <= i} M_ij x_jp
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = m0 + lr + 8 * r;
        if (i >= L) continue;
        bf16_t* yr = yc + int64_t(i) * k.H * P;
        const bf16_t* xr = X + i * sP;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = n0 + 8 * j + 2 * tq;  // even; P even: c < P implies c + 1 < P
          if (c >= P) continue;
          const float v0 = t.c[0][j][2 * r] + d * to_f32(xr[c]);
          const float v1 = c + 1 < P ? t.c[0][j][2 * r + 1] + d * to_f32(xr[c + 1]) : 0.0f;
          if (pairs) {
            *reinterpret_cast<uint32_t*>(yr + c) = mma::pack_bf16x2(v0, v1);
          } else {
            yr[c] = from_f32<bf16_t>(v0);
            if (c + 1 < P) yr[c + 1] = from_f32<bf16_t>(v1);
          }
        }
      }
    });
    if (live) {  // S_{c+1} = exp(cum_last) S_c + sum_i (w_i x_i) B_i^T
      const float cl = cmq[L - 1] * kLog2e;
      const float dc = mma::exp2_approx(cl);
      st.each([&](int, int, float& v) { v *= dc; });
      // w_i from the x tile's padding (above).
      auto w = [&](int i) { return *reinterpret_cast<const float*>(X + i * sP + Pp); };
      tc::mac_scaled_rows(st, X, sP, w, Bt, sN, Lp);
    }
  }
}

int64_t outer_tc_smem(const Dims& k) {
  return tile_bytes(k.Q, k.P) + tile_bytes(k.Q, k.N) + 4 * k.Q;
}
int64_t scan_tc_smem(const Dims& k) {
  const int64_t qp = k.Q > k.P ? k.Q : k.P;
  return tile_bytes(k.Q, k.N) + tile_bytes(qp, k.N) + tile_bytes(k.Q, k.P) +
         tile_bytes(k.Q, k.Q) + 8 * k.Q;
}

}  // namespace

void launch_chunk_outer_tc(const Dims& k, const bf16_t* u, const bf16_t* v, const float* dt,
                           const float* cum, bool to_end, float* out, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  launch_chunks(chunk_outer_tc_kernel, k, outer_tc_smem(k), s, k, u, v, dt, cum, to_end, out);
}

void launch_chunk_scan_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                          const bf16_t* Cm, const float* D, const float* cum,
                          const float* states, bf16_t* y, cudaStream_t s) {
  if (k.nc * k.B * k.H == 0) return;
  launch_chunks(chunk_scan_tc_kernel, k, scan_tc_smem(k), s, k, x, dt, Bm, Cm, D, cum, states,
                y);
}

int64_t scan_spans_smem(const Dims& k) {
  return 2 * (2 * tile_bytes(k.Q, k.N) + tile_bytes(k.Q, k.P)) + tile_bytes(k.P, k.N) +
         tile_bytes(k.Q, k.Q) + 4 * 4 * pad16(int(k.Q));
}

void launch_scan_spans_tc(const Dims& k, int m, const bf16_t* x, const float* dt,
                          const bf16_t* Bm, const bf16_t* Cm, const float* D, const float* cum,
                          const float* spans, bf16_t* y, bf16_t* out_chunks,
                          cudaStream_t s) {
  const int64_t ns = ceil_div(k.nc, m);
  if (ns * k.B * k.H == 0) return;
  const int64_t bytes = scan_spans_smem(k);
  with_shape(k, [&](auto shape) {
    auto* kernel = scan_spans_tc_kernel<decltype(shape)>;
    AMOR_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    kernel<<<dim3(unsigned(ns), unsigned(k.B * k.H)), kThreads, size_t(bytes), s>>>(
        k, m, x, dt, Bm, Cm, D, cum, spans, y, out_chunks);
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

int64_t forward_tc_smem(const Dims& k) {
  const int64_t a = outer_tc_smem(k), b = scan_tc_smem(k);
  return a > b ? a : b;
}

}  // namespace ssd
}  // namespace amor::cuda
