// Gated delta rule in the chunked WY/UT form (Gated DeltaNet, Yang et al. 2024; flash-linear-
// attention's chunk_gated_delta_rule), forward and backward, chunk by chunk. It computes exactly
// the recurrence of gated_delta_recurrent_ref.h; this is the algorithm the CUDA kernel mirrors.
//
// FORWARD. Per head, split time into chunks of L steps (the last one may be shorter, n <= L rows).
// In a chunk with rows r = 0..n-1 and state S [K,V] at its start:
//   gam_r = g_0 + ... + g_r                     cumulative log decay inside the chunk (<= 0)
//   e_r   = exp(gam_r),  D_rj = exp(gam_r - gam_j)   (j <= r: every exponent is <= 0, no overflow)
//   A_rj  = beta_r (k_r . k_j) D_rj  for j < r, else 0          [n,n] strictly lower
//   Tm    = (I + A)^-1                          unit lower; forward substitution, row by row:
//           Tm_rr = 1,  Tm_rj = -sum_{m=j..r-1} A_rm Tm_mj
//   W     = Tm diag(beta e) K                   [n,K]   (the WY/UT representation)
//   U     = Tm diag(beta) V                     [n,V]
//   Vn    = U - W S                             [n,V]   = v'_r of the recurrence
//   P_rj  = scale (q_r . k_j) D_rj  for j <= r, else 0          [n,n] causal, diagonal included
//   O     = scale diag(e) Q S + P Vn            [n,V]
//   S'    = e_{n-1} S + Kh^T Vn,   Kh_j = exp(gam_{n-1} - gam_j) k_j     (state for next chunk)
// Why: unrolling the recurrence inside the chunk gives S_r = e_r S + sum_{j<=r} D_rj k_j v'_j^T,
// so v'_r = beta_r (v_r - e_r S^T k_r - sum_{j<r} D_rj (k_r.k_j) v'_j), i.e. (I + A) V' =
// diag(beta) V - diag(beta e) K S, and V' = U - W S; o_r = scale S_r^T q_r expands to O above.
//
// BACKWARD. A forward pass keeps the state at the start of every chunk. Then, over chunks in
// reverse, with dS' = gradient of the chunk's end state (d_final_state for the last chunk):
//   dVn    = P^T dO + Kh dS'^T,  i.e. dVn_j = sum_{r>=j} P_rj dO_r + exp(gam_{n-1}-gam_j) dS'^T k_j
//   dS     = scale Q^T diag(e) dO + e_{n-1} dS' - W^T dVn        (-> dS' of the previous chunk)
//   O = scale diag(e) Q S:   dq_r += scale e_r S dO_r,   dgam_r += <dO_r, scale e_r S^T q_r>
//   O += P Vn:   dP_rj = dO_r . Vn_j (j <= r);  dq_r += scale sum_j dP_rj D_rj k_j;
//                dk_j += scale sum_r dP_rj D_rj q_r;  dgam_r += dP_rj P_rj,  dgam_j -= dP_rj P_rj
//   S' = e_{n-1} S + Kh^T Vn:   dgam_{n-1} += e_{n-1} <dS', S>;  dKh_j = dS' Vn_j;
//                dk_j += exp(gam_{n-1}-gam_j) dKh_j;
//                x_j = Kh_j . dKh_j:  dgam_{n-1} += x_j,  dgam_j -= x_j
//   Vn = U - W S:   dU = dVn,  dW_r = -S dVn_r
//   U = Tm diag(beta) V:  dTm_rj += dU_r . beta_j v_j;  y_j = sum_{r>=j} Tm_rj dU_r:
//                dv_j = beta_j y_j,  dbeta_j += v_j . y_j
//   W = Tm diag(beta e) K:  dTm_rj += dW_r . beta_j e_j k_j;  z_j = sum_{r>=j} Tm_rj dW_r:
//                dk_j += beta_j e_j z_j;
//                w_j = e_j (k_j . z_j):  dbeta_j += w_j,  dgam_j += beta_j w_j
//   Tm = (I + A)^-1:  dA = -Tm^T dTm Tm^T, kept strictly lower (only those entries of A exist)
//   A_rj = beta_r (k_r.k_j) D_rj:  dbeta_r += dA_rj (k_r.k_j) D_rj;  dk_r += dA_rj beta_r D_rj k_j;
//                dk_j += dA_rj beta_r D_rj k_r;  dgam_r += dA_rj A_rj,  dgam_j -= dA_rj A_rj
//   gam = cumsum(g):  dg_s = sum_{r>=s} dgam_r     (reverse cumulative sum inside the chunk)
// and d(initial state) = dS after the first chunk. Every position belongs to one chunk, so the
// chunk's dq, dk, dv, dg, dbeta are final once its step is done (a GPU does the dS pass over
// chunks first, storing dS' and dVn per chunk, then all chunks' remaining terms in parallel).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/gated_delta/gated_delta_ref_common.h"

namespace amor::ref {

// One head's inputs (and, in the backward, its gradients) as time sequences.
template <class T>
struct GdnHead {
  HeadSeq<const T> q, k, v, g, beta;
};

template <class T>
GdnHead<T> gdn_head(const T* q, const T* k, const T* v, const T* g, const T* beta,
                    const GatedDeltaDims& d, int64_t b, int64_t h) {
  return {head_seq(q, d, b, h, d.K), head_seq(k, d, b, h, d.K), head_seq(v, d, b, h, d.V),
          head_seq(g, d, b, h, 1), head_seq(beta, d, b, h, 1)};
}

// The state-independent quantities of one chunk: gam, A, Tm, W, U.
template <class T>
struct GdnChunk {
  int64_t t0 = 0, n = 0;  // first time step and row count
  std::vector<T> gam;     // [n]
  std::vector<T> A, Tm;   // [n,n]
  std::vector<T> W;       // [n,K]
  std::vector<T> U;       // [n,V]
  std::vector<T> Vn;      // [n,V], filled by gdn_chunk_apply_state

  T dot_k(const GdnHead<T>& x, int64_t r, int64_t j, int64_t K) const {
    T s = 0;
    for (int64_t i = 0; i < K; ++i) s += x.k[t0 + r][i] * x.k[t0 + j][i];
    return s;
  }
  T decay(int64_t r, int64_t j) const { return std::exp(gam[r] - gam[j]); }  // D_rj
};

template <class T>
void gdn_chunk_prepare(const GdnHead<T>& x, int64_t t0, int64_t n, int64_t K, int64_t V,
                       GdnChunk<T>& c) {
  c.t0 = t0;
  c.n = n;
  c.gam.assign(n, T(0));
  c.A.assign(n * n, T(0));
  c.Tm.assign(n * n, T(0));
  c.W.assign(n * K, T(0));
  c.U.assign(n * V, T(0));
  c.Vn.assign(n * V, T(0));
  T acc = 0;
  for (int64_t r = 0; r < n; ++r) c.gam[r] = acc += x.g[t0 + r][0];
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < r; ++j)
      c.A[r * n + j] = x.beta[t0 + r][0] * c.dot_k(x, r, j, K) * c.decay(r, j);
  for (int64_t r = 0; r < n; ++r) {
    c.Tm[r * n + r] = 1;
    for (int64_t j = 0; j < r; ++j) {
      T s = 0;
      for (int64_t m = j; m < r; ++m) s += c.A[r * n + m] * c.Tm[m * n + j];
      c.Tm[r * n + j] = -s;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j <= r; ++j) {
      const T bj = x.beta[t0 + j][0], tw = c.Tm[r * n + j];
      const T ej = std::exp(c.gam[j]);
      for (int64_t i = 0; i < K; ++i) c.W[r * K + i] += tw * bj * ej * x.k[t0 + j][i];
      for (int64_t i = 0; i < V; ++i) c.U[r * V + i] += tw * bj * x.v[t0 + j][i];
    }
  }
}

// Vn = U - W S for the state S [K,V] at the chunk's start.
template <class T>
void gdn_chunk_apply_state(const T* S, int64_t K, int64_t V, GdnChunk<T>& c) {
  for (int64_t r = 0; r < c.n; ++r) {
    for (int64_t cv = 0; cv < V; ++cv) {
      T ws = 0;
      for (int64_t i = 0; i < K; ++i) ws += c.W[r * K + i] * S[i * V + cv];
      c.Vn[r * V + cv] = c.U[r * V + cv] - ws;
    }
  }
}

// O rows of the chunk (written when o is non-null) and S <- S' in place.
template <class T>
void gdn_chunk_output_and_state(const GdnHead<T>& x, T scale, int64_t K, int64_t V,
                                const GdnChunk<T>& c, HeadSeq<T>* o, T* S) {
  const int64_t n = c.n, t0 = c.t0;
  if (o) {
    for (int64_t r = 0; r < n; ++r) {
      const T* qr = x.q[t0 + r];
      const T er = std::exp(c.gam[r]);
      for (int64_t cv = 0; cv < V; ++cv) {
        T inter = 0;
        for (int64_t i = 0; i < K; ++i) inter += qr[i] * S[i * V + cv];
        (*o)[t0 + r][cv] = scale * er * inter;
      }
      for (int64_t j = 0; j <= r; ++j) {
        T qk = 0;
        for (int64_t i = 0; i < K; ++i) qk += qr[i] * x.k[t0 + j][i];
        const T p = scale * qk * c.decay(r, j);
        for (int64_t cv = 0; cv < V; ++cv) (*o)[t0 + r][cv] += p * c.Vn[j * V + cv];
      }
    }
  }
  const T elast = std::exp(c.gam[n - 1]);
  for (int64_t i = 0; i < K * V; ++i) S[i] *= elast;
  for (int64_t j = 0; j < n; ++j) {
    const T dj = c.decay(n - 1, j);
    for (int64_t i = 0; i < K; ++i)
      for (int64_t cv = 0; cv < V; ++cv) S[i * V + cv] += dj * x.k[t0 + j][i] * c.Vn[j * V + cv];
  }
}

// s0 may be null (zero initial state).
template <class T>
void gated_delta_chunked_forward(const T* q, const T* k, const T* v, const T* g, const T* beta,
                                 const T* s0, T scale, int64_t chunk, T* o, T* s_final,
                                 const GatedDeltaDims& d) {
  GdnChunk<T> c;
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      const GdnHead<T> x = gdn_head(q, k, v, g, beta, d, b, h);
      HeadSeq<T> os = head_seq(o, d, b, h, d.V);
      T* S = s_final + state_offset(d, b, h);
      for (int64_t i = 0; i < d.K * d.V; ++i) S[i] = s0 ? s0[state_offset(d, b, h) + i] : T(0);
      for (int64_t t0 = 0; t0 < d.T; t0 += chunk) {
        gdn_chunk_prepare(x, t0, std::min(chunk, d.T - t0), d.K, d.V, c);
        gdn_chunk_apply_state(S, d.K, d.V, c);
        gdn_chunk_output_and_state(x, scale, d.K, d.V, c, &os, S);
      }
    }
  }
}

// Gradients of one head's outputs as time sequences.
template <class T>
struct GdnHeadGrads {
  HeadSeq<T> dq, dk, dv, dg, dbeta;
};

// One chunk's backward: reads dO and dSn (= dS' of the chunk end), writes the chunk's rows of the
// gradients and dS (gradient of the chunk's start state S). dS may alias dSn.
template <class T>
void gdn_chunk_backward(const GdnHead<T>& x, HeadSeq<const T> dos, T scale, int64_t K, int64_t V,
                        const GdnChunk<T>& c, const T* S, const T* dSn_in,
                        const GdnHeadGrads<T>& gr, T* dS_out) {
  const int64_t n = c.n, t0 = c.t0, KV = K * V;
  auto q = [&](int64_t r) { return x.q[t0 + r]; };
  auto k = [&](int64_t r) { return x.k[t0 + r]; };
  auto dO = [&](int64_t r) { return dos[t0 + r]; };
  auto beta = [&](int64_t r) { return x.beta[t0 + r][0]; };
  std::vector<T> dSn(dSn_in, dSn_in + KV), dS(KV, T(0)), dgam(n, T(0)), dVn(n * V, T(0));
  std::vector<T> dq(n * K, T(0)), dk(n * K, T(0)), dv(n * V, T(0)), dbeta(n, T(0));
  std::vector<T> dW(n * K, T(0)), dTm(n * n, T(0));
  const T elast = std::exp(c.gam[n - 1]);

  // dVn = P^T dO + Kh dS'^T
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t r = j; r < n; ++r) {
      T qk = 0;
      for (int64_t i = 0; i < K; ++i) qk += q(r)[i] * k(j)[i];
      const T p = scale * qk * c.decay(r, j);
      for (int64_t cv = 0; cv < V; ++cv) dVn[j * V + cv] += p * dO(r)[cv];
    }
    const T dj = c.decay(n - 1, j);
    for (int64_t cv = 0; cv < V; ++cv) {
      T s = 0;
      for (int64_t i = 0; i < K; ++i) s += dSn[i * V + cv] * k(j)[i];
      dVn[j * V + cv] += dj * s;
    }
  }

  // O = scale diag(e) Q S
  for (int64_t r = 0; r < n; ++r) {
    const T er = std::exp(c.gam[r]);
    for (int64_t i = 0; i < K; ++i) {
      T s = 0;
      for (int64_t cv = 0; cv < V; ++cv) s += S[i * V + cv] * dO(r)[cv];
      dq[r * K + i] += scale * er * s;
      dgam[r] += scale * er * q(r)[i] * s;
      for (int64_t cv = 0; cv < V; ++cv) dS[i * V + cv] += scale * er * q(r)[i] * dO(r)[cv];
    }
  }

  // O += P Vn
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j <= r; ++j) {
      T dp = 0, qk = 0;
      for (int64_t cv = 0; cv < V; ++cv) dp += dO(r)[cv] * c.Vn[j * V + cv];
      for (int64_t i = 0; i < K; ++i) qk += q(r)[i] * k(j)[i];
      const T drj = c.decay(r, j), p = scale * qk * drj;
      for (int64_t i = 0; i < K; ++i) {
        dq[r * K + i] += scale * dp * drj * k(j)[i];
        dk[j * K + i] += scale * dp * drj * q(r)[i];
      }
      dgam[r] += dp * p;
      dgam[j] -= dp * p;
    }
  }

  // S' = e_last S + Kh^T Vn
  for (int64_t i = 0; i < KV; ++i) {
    dS[i] += elast * dSn[i];
    dgam[n - 1] += elast * dSn[i] * S[i];
  }
  for (int64_t j = 0; j < n; ++j) {
    const T dj = c.decay(n - 1, j);
    T xj = 0;
    for (int64_t i = 0; i < K; ++i) {
      T dkh = 0;
      for (int64_t cv = 0; cv < V; ++cv) dkh += dSn[i * V + cv] * c.Vn[j * V + cv];
      dk[j * K + i] += dj * dkh;
      xj += dj * k(j)[i] * dkh;
    }
    dgam[n - 1] += xj;
    dgam[j] -= xj;
  }

  // Vn = U - W S  (dU = dVn)
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < K; ++i) {
      T s = 0;
      for (int64_t cv = 0; cv < V; ++cv) {
        s += S[i * V + cv] * dVn[r * V + cv];
        dS[i * V + cv] -= c.W[r * K + i] * dVn[r * V + cv];
      }
      dW[r * K + i] = -s;
    }
  }

  // U = Tm diag(beta) V and W = Tm diag(beta e) K
  for (int64_t j = 0; j < n; ++j) {
    const T bj = beta(j), ej = std::exp(c.gam[j]);
    const T* vj = x.v[t0 + j];
    for (int64_t r = j; r < n; ++r) {
      T du = 0, dw = 0;
      for (int64_t cv = 0; cv < V; ++cv) du += dVn[r * V + cv] * vj[cv];
      for (int64_t i = 0; i < K; ++i) dw += dW[r * K + i] * k(j)[i];
      dTm[r * n + j] = bj * du + bj * ej * dw;
    }
    T vy = 0, kz = 0;
    for (int64_t cv = 0; cv < V; ++cv) {
      T y = 0;
      for (int64_t r = j; r < n; ++r) y += c.Tm[r * n + j] * dVn[r * V + cv];
      dv[j * V + cv] = bj * y;
      vy += vj[cv] * y;
    }
    for (int64_t i = 0; i < K; ++i) {
      T z = 0;
      for (int64_t r = j; r < n; ++r) z += c.Tm[r * n + j] * dW[r * K + i];
      dk[j * K + i] += bj * ej * z;
      kz += k(j)[i] * z;
    }
    dbeta[j] += vy + ej * kz;
    dgam[j] += bj * ej * kz;
  }

  // Tm = (I + A)^-1: dA = -Tm^T dTm Tm^T on the strictly lower part,
  // then A_rj = beta_r (k_r.k_j) D_rj
  std::vector<T> M(n * n, T(0));  // Tm^T dTm
  for (int64_t r = 0; r < n; ++r)
    for (int64_t bcol = 0; bcol < n; ++bcol)
      for (int64_t a = 0; a < n; ++a) M[r * n + bcol] += c.Tm[a * n + r] * dTm[a * n + bcol];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < r; ++j) {
      T s = 0;
      for (int64_t bcol = 0; bcol < n; ++bcol) s += M[r * n + bcol] * c.Tm[j * n + bcol];
      const T dA = -s;
      const T kk = c.dot_k(x, r, j, K), drj = c.decay(r, j), br = beta(r);
      dbeta[r] += dA * kk * drj;
      for (int64_t i = 0; i < K; ++i) {
        dk[r * K + i] += dA * br * drj * k(j)[i];
        dk[j * K + i] += dA * br * drj * k(r)[i];
      }
      dgam[r] += dA * c.A[r * n + j];
      dgam[j] -= dA * c.A[r * n + j];
    }
  }

  // gam = cumsum(g)
  T rev = 0;
  for (int64_t r = n - 1; r >= 0; --r) {
    rev += dgam[r];
    gr.dg[t0 + r][0] = rev;
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < K; ++i) {
      gr.dq[t0 + r][i] = dq[r * K + i];
      gr.dk[t0 + r][i] = dk[r * K + i];
    }
    for (int64_t cv = 0; cv < V; ++cv) gr.dv[t0 + r][cv] = dv[r * V + cv];
    gr.dbeta[t0 + r][0] = dbeta[r];
  }
  std::copy(dS.begin(), dS.end(), dS_out);
}

// s0 and ds_final may be null (zero); ds0 may be null (not wanted).
template <class T>
void gated_delta_chunked_backward(const T* q, const T* k, const T* v, const T* g, const T* beta,
                                  const T* s0, T scale, int64_t chunk, const T* d_o,
                                  const T* ds_final, T* dq, T* dk, T* dv, T* dg, T* dbeta, T* ds0,
                                  const GatedDeltaDims& d) {
  const int64_t KV = d.K * d.V, chunks = (d.T + chunk - 1) / chunk;
  std::vector<T> starts(chunks * KV), S(KV), dS(KV);
  GdnChunk<T> c;
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      const GdnHead<T> x = gdn_head(q, k, v, g, beta, d, b, h);
      const GdnHeadGrads<T> gr{head_seq(dq, d, b, h, d.K), head_seq(dk, d, b, h, d.K),
                               head_seq(dv, d, b, h, d.V), head_seq(dg, d, b, h, 1),
                               head_seq(dbeta, d, b, h, 1)};
      const HeadSeq<const T> dos = head_seq(d_o, d, b, h, d.V);
      const int64_t so = state_offset(d, b, h);

      // Forward over chunks, keeping each chunk's start state.
      for (int64_t i = 0; i < KV; ++i) S[i] = s0 ? s0[so + i] : T(0);
      for (int64_t ci = 0; ci < chunks; ++ci) {
        std::copy(S.begin(), S.end(), starts.begin() + ci * KV);
        const int64_t t0 = ci * chunk;
        gdn_chunk_prepare(x, t0, std::min(chunk, d.T - t0), d.K, d.V, c);
        gdn_chunk_apply_state(S.data(), d.K, d.V, c);
        gdn_chunk_output_and_state<T>(x, scale, d.K, d.V, c, nullptr, S.data());
      }

      // Backward over chunks in reverse; dS carries the state gradient between chunks.
      for (int64_t i = 0; i < KV; ++i) dS[i] = ds_final ? ds_final[so + i] : T(0);
      for (int64_t ci = chunks - 1; ci >= 0; --ci) {
        const int64_t t0 = ci * chunk;
        const T* Sc = starts.data() + ci * KV;
        gdn_chunk_prepare(x, t0, std::min(chunk, d.T - t0), d.K, d.V, c);
        gdn_chunk_apply_state(Sc, d.K, d.V, c);
        gdn_chunk_backward(x, dos, scale, d.K, d.V, c, Sc, dS.data(), gr, dS.data());
      }
      if (ds0) std::copy(dS.begin(), dS.end(), ds0 + so);
    }
  }
}

}  // namespace amor::ref
