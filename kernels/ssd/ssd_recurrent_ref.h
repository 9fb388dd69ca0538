// Mamba2 SSD scan, step by step: the plain reference that the chunked algorithm
// (ssd_chunked_ref.h) and the CUDA kernels are checked against.
//
// Per batch b and head h (group g = h / (H/G)), with a state h_t in R^{P x N}:
//
//   a_t = dt_t * A                              (log decay; dt > 0 and A < 0 so exp(a_t) < 1)
//   h_t = exp(a_t) h_{t-1} + dt_t x_t B_t^T     h_{-1} = h0 (zeros when absent)
//   y_t = h_t C_t + D x_t                       final state = h_{T-1}
//
// Backward (BPTT). Let S_t = dL/dh_t in total: S_{T-1} = dL/dfinal + dy_{T-1} C_{T-1}^T and
//   S_t = exp(a_{t+1}) S_{t+1} + dy_t C_t^T.  Then, per step,
//   dC_t  += h_t^T dy_t                         dx_t = D dy_t + dt_t S_t B_t
//   dB_t  += dt_t S_t^T x_t                     dD  += <dy_t, x_t>
//   da_t   = exp(a_t) <S_t, h_{t-1}>            ddt_t = <S_t, x_t B_t^T> + A da_t
//   dA    += dt_t da_t                          dh0 = exp(a_0) S_0
// (<.,.> sums over all elements.) dB and dC add over the heads that share a group. The forward
// states h_t are kept for the backward: recovering h_{t-1} from h_t would divide by exp(a_t).
//
// ssd_step is one step of the recurrence on a decode state updated in place.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ssd/ssd_layout.h"

namespace amor::ref {

// y [B,T,H,P], hT [B,H,P,N]; h0 may be null (zeros).
template <class T>
void ssd_recurrent_forward(const SsdLayout& L, const T* x, const T* dt, const T* A, const T* Bm,
                           const T* Cm, const T* D, const T* h0, T* y, T* hT) {
  const int64_t P = L.headdim, N = L.dstate;
  std::vector<T> s(L.state_size());
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t h = 0; h < L.heads; ++h) {
      for (int64_t i = 0; i < L.state_size(); ++i) s[i] = h0 ? h0[L.state_at(b, h) + i] : T(0);
      for (int64_t t = 0; t < L.seqlen; ++t) {
        const T* xt = x + L.x_at(b, t, h);
        const T* Bt = Bm + L.bc_at(b, t, h);
        const T* Ct = Cm + L.bc_at(b, t, h);
        T dtt = dt[L.dt_at(b, t, h)];
        T decay = std::exp(dtt * A[h]);
        T* yt = y + L.x_at(b, t, h);
        for (int64_t p = 0; p < P; ++p) {
          T acc = D[h] * xt[p];
          for (int64_t n = 0; n < N; ++n) {
            T& sv = s[p * N + n];
            sv = decay * sv + dtt * xt[p] * Bt[n];
            acc += sv * Ct[n];
          }
          yt[p] = acc;
        }
      }
      std::copy(s.begin(), s.end(), hT + L.state_at(b, h));
    }
}

// Gradients of L given dy [B,T,H,P] and dhT [B,H,P,N] (null: the final state is not used).
// Every gradient is overwritten. dh0 may be null (no initial state to differentiate); h0 may be
// null (zeros).
template <class T>
void ssd_recurrent_backward(const SsdLayout& L, const T* x, const T* dt, const T* A, const T* Bm,
                            const T* Cm, const T* D, const T* h0, const T* dy, const T* dhT, T* dx,
                            T* ddt, T* dA, T* dB, T* dC, T* dD, T* dh0) {
  const int64_t P = L.headdim, N = L.dstate, S = L.state_size(), Tn = L.seqlen;
  const int64_t bc_numel = L.batch * Tn * L.groups * N;
  std::fill(dB, dB + bc_numel, T(0));
  std::fill(dC, dC + bc_numel, T(0));
  std::fill(dA, dA + L.heads, T(0));
  std::fill(dD, dD + L.heads, T(0));
  // states[(t + 1) * S ...] = h_t, states[0 ...] = h_{-1}.
  std::vector<T> states((Tn + 1) * S), g(S);
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t h = 0; h < L.heads; ++h) {
      for (int64_t i = 0; i < S; ++i) states[i] = h0 ? h0[L.state_at(b, h) + i] : T(0);
      for (int64_t t = 0; t < Tn; ++t) {
        const T* xt = x + L.x_at(b, t, h);
        const T* Bt = Bm + L.bc_at(b, t, h);
        T dtt = dt[L.dt_at(b, t, h)];
        T decay = std::exp(dtt * A[h]);
        for (int64_t p = 0; p < P; ++p)
          for (int64_t n = 0; n < N; ++n)
            states[(t + 1) * S + p * N + n] = decay * states[t * S + p * N + n] + dtt * xt[p] * Bt[n];
      }
      // g carries exp(a_{t+1}) S_{t+1}, the gradient reaching h_t from later steps.
      for (int64_t i = 0; i < S; ++i) g[i] = dhT ? dhT[L.state_at(b, h) + i] : T(0);
      for (int64_t t = Tn - 1; t >= 0; --t) {
        const T* xt = x + L.x_at(b, t, h);
        const T* Bt = Bm + L.bc_at(b, t, h);
        const T* Ct = Cm + L.bc_at(b, t, h);
        const T* dyt = dy + L.x_at(b, t, h);
        const T* ht = &states[(t + 1) * S];
        const T* hprev = &states[t * S];
        T* dBt = dB + L.bc_at(b, t, h);
        T* dCt = dC + L.bc_at(b, t, h);
        T* dxt = dx + L.x_at(b, t, h);
        T dtt = dt[L.dt_at(b, t, h)];
        T decay = std::exp(dtt * A[h]);
        T g_dot_xB = 0, g_dot_hprev = 0;
        for (int64_t p = 0; p < P; ++p) {
          dD[h] += dyt[p] * xt[p];
          T g_dot_B = 0;
          for (int64_t n = 0; n < N; ++n) {
            T& gv = g[p * N + n];
            gv += dyt[p] * Ct[n];  // now S_t
            dCt[n] += ht[p * N + n] * dyt[p];
            dBt[n] += dtt * gv * xt[p];
            g_dot_B += gv * Bt[n];
            g_dot_hprev += gv * hprev[p * N + n];
          }
          dxt[p] = D[h] * dyt[p] + dtt * g_dot_B;
          g_dot_xB += g_dot_B * xt[p];
        }
        T da = decay * g_dot_hprev;
        ddt[L.dt_at(b, t, h)] = g_dot_xB + A[h] * da;
        dA[h] += dtt * da;
        for (int64_t i = 0; i < S; ++i) g[i] *= decay;  // exp(a_t) S_t reaches h_{t-1}
      }
      if (dh0) std::copy(g.begin(), g.end(), dh0 + L.state_at(b, h));
    }
}

// One decode step on a state [B,H,P,N] updated in place: x, y [B,H,P]; dt [B,H]; B, C [B,G,N].
// The layout is a scan's with seqlen 1.
template <class T>
void ssd_step(const SsdLayout& L, const T* x, const T* dt, const T* A, const T* Bm, const T* Cm,
              const T* D, T* state, T* y) {
  const int64_t P = L.headdim, N = L.dstate;
  for (int64_t b = 0; b < L.batch; ++b)
    for (int64_t h = 0; h < L.heads; ++h) {
      const T* xt = x + L.x_at(b, 0, h);
      const T* Bt = Bm + L.bc_at(b, 0, h);
      const T* Ct = Cm + L.bc_at(b, 0, h);
      T dtt = dt[L.dt_at(b, 0, h)];
      T decay = std::exp(dtt * A[h]);
      T* s = state + L.state_at(b, h);
      for (int64_t p = 0; p < P; ++p) {
        T acc = D[h] * xt[p];
        for (int64_t n = 0; n < N; ++n) {
          s[p * N + n] = decay * s[p * N + n] + dtt * xt[p] * Bt[n];
          acc += s[p * N + n] * Ct[n];
        }
        y[L.x_at(b, 0, h) + p] = acc;
      }
    }
}

}  // namespace amor::ref
