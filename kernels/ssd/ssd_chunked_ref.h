// Mamba2 SSD scan, chunked ("state space duality", Dao & Gu 2024; mamba_ssm's
// mamba_chunk_scan_combined without softplus, dt bias or z gating), forward and backward.
// The same recurrence as ssd_recurrent_ref.h, computed the way the CUDA kernels compute it.
//
// Notation per batch b and head h (group g = h / (H/G)), a_t = dt_t A. Time is cut into chunks of
// Q steps (the last one may be shorter); chunk c holds steps t = cQ + i, i = 0..L_c-1, and
// "last" = L_c - 1. Within chunk c:
//
//   cum_i = a_{cQ} + ... + a_{cQ+i}                   inclusive cumulative log decay
//   E_ij  = exp(cum_i - cum_j), j <= i                decay from step j to step i (segment sum)
//   w_j   = exp(cum_last - cum_j) dt_j                weight of input j in the chunk's end state
//
// Forward, in the order the kernels run it:
//   (1) chunk state    R_c = sum_j w_j x_j B_j^T                             [P,N], chunks in parallel
//   (2) state passing  S_0 = h0,  S_{c+1} = exp(cum_last) S_c + R_c          sequential over chunks
//                      final state = S_{nc}  (S_c is the state entering chunk c)
//   (3) chunk scan     y_i = sum_{j<=i} (C_i.B_j) E_ij dt_j x_j              intra-chunk, quadratic
//                          + exp(cum_i) S_c C_i                              carried state
//                          + D x_i                                           chunks in parallel
//
// Backward. G_c denotes the total gradient dL/dS_c.
//   (3') scan's state gradient  dS^scan_c = sum_i exp(cum_i) dy_i C_i^T     chunks in parallel
//   (2') reverse state passing  G_{nc} = dL/dfinal (0 when absent),
//                               G_c = exp(cum_last) G_{c+1} + dS^scan_c,   dh0 = G_0
//        so G_{c+1} is the gradient of chunk c's end state.
//   (1') per chunk, given S_c and G_{c+1} (chunks in parallel); dcum_i collects dL/dcum_i:
//     intra-chunk, for j <= i, with dM_ij = <dy_i, x_j> and K_ij = C_i.B_j:
//        dx_j  += K_ij E_ij dt_j dy_i
//        dC_i  += dM_ij E_ij dt_j B_j          dB_j += dM_ij E_ij dt_j C_i
//        ddt_j += dM_ij K_ij E_ij
//        dcum_i += dM_ij K_ij E_ij dt_j,  dcum_j -= the same  (cancels for i = j)
//     carried state:
//        dC_i  += exp(cum_i) S_c^T dy_i        dcum_i += exp(cum_i) <dy_i, S_c C_i>
//     skip:   dx_i += D dy_i,  dD += <dy_i, x_i>
//     chunk state, with dw_j = <G_{c+1}, x_j B_j^T> = x_j . (G_{c+1} B_j):
//        dx_j  += w_j G_{c+1} B_j              dB_j += w_j G_{c+1}^T x_j
//        ddt_j += exp(cum_last - cum_j) dw_j
//        dcum_last += w_j dw_j,  dcum_j -= w_j dw_j
//     state passing:  dcum_last += exp(cum_last) <G_{c+1}, S_c>
//     cumsum:  da_k = sum_{i >= k} dcum_i (reverse cumsum within the chunk),
//              ddt_k += A da_k,  dA += dt_k da_k
// dB and dC add over the heads of a group; dA and dD over batch and time.
//
// Every exponent above is <= 0 when dt > 0 and A < 0, so nothing overflows. Plain loops; T is
// float or double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ssd/ssd_layout.h"

namespace amor::ref {

namespace ssd_detail {

// One chunk of one (batch, head) lane: steps start .. start + len - 1.
struct Chunk {
  int64_t b, h, start, len;
};

template <class T>
void chunk_cumsum(const SsdLayout& L, const T* dt, const T* A, const Chunk& c, T* cum) {
  T acc = 0;
  for (int64_t i = 0; i < c.len; ++i) {
    acc += dt[L.dt_at(c.b, c.start + i, c.h)] * A[c.h];
    cum[i] = acc;
  }
}

// (1) R = sum_j w_j x_j B_j^T.
template <class T>
void chunk_state(const SsdLayout& L, const T* x, const T* dt, const T* Bm, const Chunk& c,
                 const T* cum, T* R) {
  const int64_t P = L.headdim, N = L.dstate;
  std::fill(R, R + P * N, T(0));
  for (int64_t j = 0; j < c.len; ++j) {
    const int64_t t = c.start + j;
    T w = std::exp(cum[c.len - 1] - cum[j]) * dt[L.dt_at(c.b, t, c.h)];
    const T* xj = x + L.x_at(c.b, t, c.h);
    const T* Bj = Bm + L.bc_at(c.b, t, c.h);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t n = 0; n < N; ++n) R[p * N + n] += w * xj[p] * Bj[n];
  }
}

// (3) y of one chunk from its inputs and the state S entering it.
template <class T>
void chunk_scan(const SsdLayout& L, const T* x, const T* dt, const T* Bm, const T* Cm, const T* D,
                const Chunk& c, const T* cum, const T* S, T* y) {
  const int64_t P = L.headdim, N = L.dstate;
  for (int64_t i = 0; i < c.len; ++i) {
    const int64_t ti = c.start + i;
    const T* Ci = Cm + L.bc_at(c.b, ti, c.h);
    const T* xi = x + L.x_at(c.b, ti, c.h);
    T* yi = y + L.x_at(c.b, ti, c.h);
    T carried = std::exp(cum[i]);
    for (int64_t p = 0; p < P; ++p) {
      T acc = D[c.h] * xi[p];
      for (int64_t n = 0; n < N; ++n) acc += carried * S[p * N + n] * Ci[n];
      yi[p] = acc;
    }
    for (int64_t j = 0; j <= i; ++j) {
      const int64_t tj = c.start + j;
      const T* Bj = Bm + L.bc_at(c.b, tj, c.h);
      const T* xj = x + L.x_at(c.b, tj, c.h);
      T K = 0;
      for (int64_t n = 0; n < N; ++n) K += Ci[n] * Bj[n];
      T m = K * std::exp(cum[i] - cum[j]) * dt[L.dt_at(c.b, tj, c.h)];
      for (int64_t p = 0; p < P; ++p) yi[p] += m * xj[p];
    }
  }
}

// (3') dS = sum_i exp(cum_i) dy_i C_i^T.
template <class T>
void chunk_scan_dstate(const SsdLayout& L, const T* Cm, const T* dy, const Chunk& c, const T* cum,
                       T* dS) {
  const int64_t P = L.headdim, N = L.dstate;
  std::fill(dS, dS + P * N, T(0));
  for (int64_t i = 0; i < c.len; ++i) {
    const int64_t ti = c.start + i;
    const T* Ci = Cm + L.bc_at(c.b, ti, c.h);
    const T* dyi = dy + L.x_at(c.b, ti, c.h);
    T e = std::exp(cum[i]);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t n = 0; n < N; ++n) dS[p * N + n] += e * dyi[p] * Ci[n];
  }
}

// (1') every gradient of one chunk, given the state S entering it and the gradient G of the
// state leaving it. Adds into dx, ddt, dB, dC, dA, dD (zeroed by the caller); dcum is scratch of
// length c.len.
template <class T>
void chunk_backward(const SsdLayout& L, const T* x, const T* dt, const T* A, const T* Bm,
                    const T* Cm, const T* D, const T* dy, const Chunk& c, const T* cum, const T* S,
                    const T* G, T* dx, T* ddt, T* dA, T* dB, T* dC, T* dD, T* dcum) {
  const int64_t P = L.headdim, N = L.dstate, last = c.len - 1;
  std::fill(dcum, dcum + c.len, T(0));
  for (int64_t i = 0; i < c.len; ++i) {
    const int64_t ti = c.start + i;
    const T* xi = x + L.x_at(c.b, ti, c.h);
    const T* Ci = Cm + L.bc_at(c.b, ti, c.h);
    const T* dyi = dy + L.x_at(c.b, ti, c.h);
    T* dxi = dx + L.x_at(c.b, ti, c.h);
    T* dCi = dC + L.bc_at(c.b, ti, c.h);
    // Skip connection.
    for (int64_t p = 0; p < P; ++p) {
      dxi[p] += D[c.h] * dyi[p];
      dD[c.h] += dyi[p] * xi[p];
    }
    // Carried state: y_i += exp(cum_i) S C_i.
    T e = std::exp(cum[i]);
    T dy_SC = 0;
    for (int64_t n = 0; n < N; ++n) {
      T St_dy = 0;  // (S^T dy_i)_n
      for (int64_t p = 0; p < P; ++p) St_dy += S[p * N + n] * dyi[p];
      dCi[n] += e * St_dy;
      dy_SC += St_dy * Ci[n];
    }
    dcum[i] += e * dy_SC;
    // Intra-chunk: y_i += K_ij E_ij dt_j x_j for j <= i.
    for (int64_t j = 0; j <= i; ++j) {
      const int64_t tj = c.start + j;
      const T* xj = x + L.x_at(c.b, tj, c.h);
      const T* Bj = Bm + L.bc_at(c.b, tj, c.h);
      T* dxj = dx + L.x_at(c.b, tj, c.h);
      T* dBj = dB + L.bc_at(c.b, tj, c.h);
      T dtj = dt[L.dt_at(c.b, tj, c.h)];
      T E = std::exp(cum[i] - cum[j]);
      T K = 0, dM = 0;
      for (int64_t n = 0; n < N; ++n) K += Ci[n] * Bj[n];
      for (int64_t p = 0; p < P; ++p) {
        dM += dyi[p] * xj[p];
        dxj[p] += K * E * dtj * dyi[p];
      }
      for (int64_t n = 0; n < N; ++n) {
        dCi[n] += dM * E * dtj * Bj[n];
        dBj[n] += dM * E * dtj * Ci[n];
      }
      ddt[L.dt_at(c.b, tj, c.h)] += dM * K * E;
      T dE = dM * K * E * dtj;
      dcum[i] += dE;
      dcum[j] -= dE;
    }
  }
  // Chunk state: R = sum_j w_j x_j B_j^T reaches the next chunk with gradient G.
  for (int64_t j = 0; j < c.len; ++j) {
    const int64_t tj = c.start + j;
    const T* xj = x + L.x_at(c.b, tj, c.h);
    const T* Bj = Bm + L.bc_at(c.b, tj, c.h);
    T* dxj = dx + L.x_at(c.b, tj, c.h);
    T* dBj = dB + L.bc_at(c.b, tj, c.h);
    T decay = std::exp(cum[last] - cum[j]);
    T w = decay * dt[L.dt_at(c.b, tj, c.h)];
    T dw = 0;
    for (int64_t p = 0; p < P; ++p) {
      T GB = 0;  // (G B_j)_p
      for (int64_t n = 0; n < N; ++n) GB += G[p * N + n] * Bj[n];
      dxj[p] += w * GB;
      dw += xj[p] * GB;
    }
    for (int64_t n = 0; n < N; ++n) {
      T Gt_x = 0;  // (G^T x_j)_n
      for (int64_t p = 0; p < P; ++p) Gt_x += G[p * N + n] * xj[p];
      dBj[n] += w * Gt_x;
    }
    ddt[L.dt_at(c.b, tj, c.h)] += decay * dw;
    dcum[last] += w * dw;
    dcum[j] -= w * dw;
  }
  // State passing: S_next = exp(cum_last) S + R.
  T G_dot_S = 0;
  for (int64_t k = 0; k < P * N; ++k) G_dot_S += G[k] * S[k];
  dcum[last] += std::exp(cum[last]) * G_dot_S;
  // Cumulative sum: cum_i = sum_{k<=i} dt_k A.
  T da = 0;
  for (int64_t k = c.len - 1; k >= 0; --k) {
    da += dcum[k];
    const int64_t tk = c.start + k;
    ddt[L.dt_at(c.b, tk, c.h)] += A[c.h] * da;
    dA[c.h] += dt[L.dt_at(c.b, tk, c.h)] * da;
  }
}

inline int64_t num_chunks(int64_t seqlen, int64_t chunk) { return (seqlen + chunk - 1) / chunk; }

inline Chunk chunk_of(const SsdLayout& L, int64_t b, int64_t h, int64_t c, int64_t chunk) {
  return {b, h, c * chunk, std::min(chunk, L.seqlen - c * chunk)};
}

}  // namespace ssd_detail

// y [B,T,H,P], hT [B,H,P,N]; h0 may be null (zeros); chunk >= 1.
template <class T>
void ssd_chunked_forward(const SsdLayout& L, int64_t chunk, const T* x, const T* dt, const T* A,
                         const T* Bm, const T* Cm, const T* D, const T* h0, T* y, T* hT) {
  using namespace ssd_detail;
  chunk = std::min(chunk, std::max<int64_t>(L.seqlen, 1));  // a chunk longer than T is one chunk
  const int64_t nc = num_chunks(L.seqlen, chunk), S = L.state_size();
  std::vector<T> cum(nc * chunk), R(nc * S), states((nc + 1) * S);
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t h = 0; h < L.heads; ++h) {
      for (int64_t c = 0; c < nc; ++c) {  // (1)
        Chunk ch = chunk_of(L, b, h, c, chunk);
        chunk_cumsum(L, dt, A, ch, &cum[c * chunk]);
        chunk_state(L, x, dt, Bm, ch, &cum[c * chunk], &R[c * S]);
      }
      for (int64_t k = 0; k < S; ++k) states[k] = h0 ? h0[L.state_at(b, h) + k] : T(0);
      for (int64_t c = 0; c < nc; ++c) {  // (2)
        T decay = std::exp(cum[c * chunk + chunk_of(L, b, h, c, chunk).len - 1]);
        for (int64_t k = 0; k < S; ++k)
          states[(c + 1) * S + k] = decay * states[c * S + k] + R[c * S + k];
      }
      for (int64_t c = 0; c < nc; ++c)  // (3)
        chunk_scan(L, x, dt, Bm, Cm, D, chunk_of(L, b, h, c, chunk), &cum[c * chunk],
                   &states[c * S], y);
      std::copy(&states[nc * S], &states[nc * S] + S, hT + L.state_at(b, h));
    }
}

// Gradients given dy [B,T,H,P] and dhT [B,H,P,N] (null: the final state is not used). Every
// gradient is overwritten; dh0 may be null (nothing to differentiate), h0 may be null (zeros).
template <class T>
void ssd_chunked_backward(const SsdLayout& L, int64_t chunk, const T* x, const T* dt, const T* A,
                          const T* Bm, const T* Cm, const T* D, const T* h0, const T* dy,
                          const T* dhT, T* dx, T* ddt, T* dA, T* dB, T* dC, T* dD, T* dh0) {
  using namespace ssd_detail;
  chunk = std::min(chunk, std::max<int64_t>(L.seqlen, 1));
  const int64_t nc = num_chunks(L.seqlen, chunk), S = L.state_size();
  const int64_t x_numel = L.batch * L.seqlen * L.heads * L.headdim;
  const int64_t bc_numel = L.batch * L.seqlen * L.groups * L.dstate;
  std::fill(dx, dx + x_numel, T(0));
  std::fill(ddt, ddt + L.batch * L.seqlen * L.heads, T(0));
  std::fill(dB, dB + bc_numel, T(0));
  std::fill(dC, dC + bc_numel, T(0));
  std::fill(dA, dA + L.heads, T(0));
  std::fill(dD, dD + L.heads, T(0));
  std::vector<T> cum(nc * chunk), R(S), states((nc + 1) * S), grads((nc + 1) * S), dscan(nc * S),
      dcum(chunk);
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t h = 0; h < L.heads; ++h) {
      // Recompute the forward's states S_c.
      for (int64_t k = 0; k < S; ++k) states[k] = h0 ? h0[L.state_at(b, h) + k] : T(0);
      for (int64_t c = 0; c < nc; ++c) {
        Chunk ch = chunk_of(L, b, h, c, chunk);
        chunk_cumsum(L, dt, A, ch, &cum[c * chunk]);
        chunk_state(L, x, dt, Bm, ch, &cum[c * chunk], R.data());
        T decay = std::exp(cum[c * chunk + ch.len - 1]);
        for (int64_t k = 0; k < S; ++k)
          states[(c + 1) * S + k] = decay * states[c * S + k] + R[k];
      }
      for (int64_t c = 0; c < nc; ++c)  // (3')
        chunk_scan_dstate(L, Cm, dy, chunk_of(L, b, h, c, chunk), &cum[c * chunk], &dscan[c * S]);
      for (int64_t k = 0; k < S; ++k) grads[nc * S + k] = dhT ? dhT[L.state_at(b, h) + k] : T(0);
      for (int64_t c = nc - 1; c >= 0; --c) {  // (2')
        T decay = std::exp(cum[c * chunk + chunk_of(L, b, h, c, chunk).len - 1]);
        for (int64_t k = 0; k < S; ++k)
          grads[c * S + k] = decay * grads[(c + 1) * S + k] + dscan[c * S + k];
      }
      for (int64_t c = 0; c < nc; ++c)  // (1')
        chunk_backward(L, x, dt, A, Bm, Cm, D, dy, chunk_of(L, b, h, c, chunk), &cum[c * chunk],
                       &states[c * S], &grads[(c + 1) * S], dx, ddt, dA, dB, dC, dD, dcum.data());
      if (dh0) std::copy(&grads[0], &grads[0] + S, dh0 + L.state_at(b, h));
    }
}

}  // namespace amor::ref
