// Gated delta rule (Gated DeltaNet, Yang et al. 2024), step by step: the plain reference that the
// chunked form and the CUDA kernels are checked against.
//
// Per head, with state S [K,V] (S_0 = initial state, zeros when none), for t = 1..T:
//   a_t  = exp(g_t)                        g_t <= 0 is the log decay
//   S~_t = a_t S_{t-1}                     decay
//   u_t  = v_t - S~_t^T k_t                what the memory already predicts for k_t, removed
//   v'_t = beta_t u_t                      beta_t in (0,1) is the write strength
//   S_t  = S~_t + k_t v'_t^T               delta-rule write
//   o_t  = scale S_t^T q_t
// outputs o [B,T,H,V] and the final state S_T [B,H,K,V].
//
// Backward through time (BPTT), dS starts at dS_T (d_final_state, or zero), for t = T..1:
//   dq_t    = scale S_t do_t               dS   += scale q_t do_t^T
//   dv'_t   = dS^T k_t                     dk_t  = dS v'_t
//   dbeta_t = <dv'_t, u_t>                 du_t  = beta_t dv'_t,  dv_t = du_t
//   dk_t   -= S~_t du_t                    dS~   = dS - k_t du_t^T
//   dg_t    = <dS~, S~_t>                  dS    = a_t dS~        (-> dS_{t-1})
// and d(initial state) = dS_0. The backward keeps every S_t of one head ((T+1)*K*V values), which
// is what a plain reference can afford; the chunked form keeps one state per chunk.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/gated_delta/gated_delta_ref_common.h"

namespace amor::ref {

// One step of one head: S [K,V] is updated in place and o [V] written; u is scratch [V].
template <class T>
void gated_delta_step_head(const T* q, const T* k, const T* v, T g, T beta, T scale, T* S, T* o,
                           int64_t K, int64_t V, T* u) {
  const T a = std::exp(g);
  for (int64_t i = 0; i < K * V; ++i) S[i] *= a;
  for (int64_t c = 0; c < V; ++c) {
    T pred = 0;
    for (int64_t i = 0; i < K; ++i) pred += S[i * V + c] * k[i];
    u[c] = v[c] - pred;
  }
  for (int64_t i = 0; i < K; ++i)
    for (int64_t c = 0; c < V; ++c) S[i * V + c] += k[i] * beta * u[c];
  for (int64_t c = 0; c < V; ++c) {
    T acc = 0;
    for (int64_t i = 0; i < K; ++i) acc += S[i * V + c] * q[i];
    o[c] = scale * acc;
  }
}

// s0 may be null (zero initial state).
template <class T>
void gated_delta_recurrent_forward(const T* q, const T* k, const T* v, const T* g, const T* beta,
                                   const T* s0, T scale, T* o, T* s_final,
                                   const GatedDeltaDims& d) {
  const int64_t KV = d.K * d.V;
  std::vector<T> u(d.V);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      T* S = s_final + state_offset(d, b, h);
      for (int64_t i = 0; i < KV; ++i) S[i] = s0 ? s0[state_offset(d, b, h) + i] : T(0);
      auto qs = head_seq(q, d, b, h, d.K), ks = head_seq(k, d, b, h, d.K);
      auto vs = head_seq(v, d, b, h, d.V), gs = head_seq(g, d, b, h, 1);
      auto bs = head_seq(beta, d, b, h, 1);
      auto os = head_seq(o, d, b, h, d.V);
      for (int64_t t = 0; t < d.T; ++t)
        gated_delta_step_head(qs[t], ks[t], vs[t], gs[t][0], bs[t][0], scale, S, os[t], d.K, d.V,
                              u.data());
    }
  }
}

// Decode: one step for every (b,h). q,k [B,H,K], v [B,H,V], g,beta [B,H], state [B,H,K,V]
// updated in place, o [B,H,V].
template <class T>
void gated_delta_step(const T* q, const T* k, const T* v, const T* g, const T* beta, T scale,
                      T* state, T* o, int64_t B, int64_t H, int64_t K, int64_t V) {
  std::vector<T> u(V);
  for (int64_t bh = 0; bh < B * H; ++bh)
    gated_delta_step_head(q + bh * K, k + bh * K, v + bh * V, g[bh], beta[bh], scale,
                          state + bh * K * V, o + bh * V, K, V, u.data());
}

// s0 and ds_final may be null (zero); ds0 may be null (not wanted).
template <class T>
void gated_delta_recurrent_backward(const T* q, const T* k, const T* v, const T* g, const T* beta,
                                    const T* s0, T scale, const T* d_o, const T* ds_final, T* dq,
                                    T* dk, T* dv, T* dg, T* dbeta, T* ds0,
                                    const GatedDeltaDims& d) {
  const int64_t K = d.K, V = d.V, KV = K * V;
  std::vector<T> states((d.T + 1) * KV), dS(KV), dSt(KV), u(V), vp(V), dvp(V), o_unused(V);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      auto qs = head_seq(q, d, b, h, K), ks = head_seq(k, d, b, h, K);
      auto vs = head_seq(v, d, b, h, V), gs = head_seq(g, d, b, h, 1);
      auto bs = head_seq(beta, d, b, h, 1), dos = head_seq(d_o, d, b, h, V);
      auto dqs = head_seq(dq, d, b, h, K), dks = head_seq(dk, d, b, h, K);
      auto dvs = head_seq(dv, d, b, h, V), dgs = head_seq(dg, d, b, h, 1);
      auto dbs = head_seq(dbeta, d, b, h, 1);
      const int64_t so = state_offset(d, b, h);

      // Forward again, keeping S_0..S_T.
      for (int64_t i = 0; i < KV; ++i) states[i] = s0 ? s0[so + i] : T(0);
      for (int64_t t = 0; t < d.T; ++t) {
        T* S = states.data() + (t + 1) * KV;
        for (int64_t i = 0; i < KV; ++i) S[i] = states[t * KV + i];
        gated_delta_step_head(qs[t], ks[t], vs[t], gs[t][0], bs[t][0], scale, S, o_unused.data(), K,
                              V, u.data());
      }

      for (int64_t i = 0; i < KV; ++i) dS[i] = ds_final ? ds_final[so + i] : T(0);
      for (int64_t t = d.T - 1; t >= 0; --t) {
        const T* Sprev = states.data() + t * KV;
        const T* St = states.data() + (t + 1) * KV;
        const T* qt = qs[t];
        const T* kt = ks[t];
        const T* dot = dos[t];
        const T a = std::exp(gs[t][0]), bt = bs[t][0];
        // u_t = v_t - a S_{t-1}^T k_t, v'_t = beta_t u_t, recomputed from the kept S_{t-1}.
        for (int64_t c = 0; c < V; ++c) {
          T pred = 0;
          for (int64_t i = 0; i < K; ++i) pred += Sprev[i * V + c] * kt[i];
          u[c] = vs[t][c] - a * pred;
          vp[c] = bt * u[c];
        }
        // o_t = scale S_t^T q_t
        for (int64_t i = 0; i < K; ++i) {
          T acc = 0;
          for (int64_t c = 0; c < V; ++c) acc += St[i * V + c] * dot[c];
          dqs[t][i] = scale * acc;
        }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t c = 0; c < V; ++c) dS[i * V + c] += scale * qt[i] * dot[c];
        // S_t = S~_t + k_t v'_t^T
        T db = 0;
        for (int64_t c = 0; c < V; ++c) {
          T acc = 0;
          for (int64_t i = 0; i < K; ++i) acc += dS[i * V + c] * kt[i];
          dvp[c] = acc;
          db += acc * u[c];
        }
        dbs[t][0] = db;
        for (int64_t i = 0; i < K; ++i) {
          T acc = 0;
          for (int64_t c = 0; c < V; ++c) acc += dS[i * V + c] * vp[c];
          dks[t][i] = acc;
        }
        // v'_t = beta_t (v_t - S~_t^T k_t); du = beta_t dv' is dv_t
        for (int64_t c = 0; c < V; ++c) dvs[t][c] = bt * dvp[c];
        for (int64_t i = 0; i < K; ++i) {
          T acc = 0;
          for (int64_t c = 0; c < V; ++c) acc += a * Sprev[i * V + c] * dvs[t][c];
          dks[t][i] -= acc;
        }
        // S~_t = a_t S_{t-1}
        T dgt = 0;
        for (int64_t i = 0; i < K; ++i) {
          for (int64_t c = 0; c < V; ++c) {
            dSt[i * V + c] = dS[i * V + c] - kt[i] * dvs[t][c];
            dgt += dSt[i * V + c] * a * Sprev[i * V + c];
          }
        }
        dgs[t][0] = dgt;
        for (int64_t i = 0; i < KV; ++i) dS[i] = a * dSt[i];
      }
      if (ds0)
        for (int64_t i = 0; i < KV; ++i) ds0[so + i] = dS[i];
    }
  }
}

}  // namespace amor::ref
