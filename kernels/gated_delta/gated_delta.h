// Gated delta rule (the Gated DeltaNet mixer's scan), forward, backward and the decode step.
//
// Per (b,h), with state S [K,V] starting at initial_state (zeros when undefined):
//   S <- exp(g_t) S;  v'_t = beta_t (v_t - S^T k_t);  S <- S + k_t v'_t^T;  o_t = S^T (scale q_t)
// q,k [B,T,H,K], v [B,T,H,V], g [B,T,H] (log decay, <= 0), beta [B,T,H] (in (0,1)); outputs
// o [B,T,H,V] and the final state [B,H,K,V]. The model L2-normalises q,k and computes g and beta;
// the op takes them as given. scale is usually gated_delta_default_scale(K) = 1/sqrt(K).
// chunk_size > 0 runs the chunked WY/UT algorithm (what the CUDA kernel does), 0 the step-by-step
// recurrence; both compute the same function (see gated_delta_chunked_ref.h).
#pragma once
#include <cmath>

#include "kernels/core/tensor.h"

namespace amor {

inline double gated_delta_default_scale(int64_t K) {
  return 1.0 / std::sqrt(static_cast<double>(K));
}

// saved: with keep_for_backward on the GPU (chunk_size > 0), the forward's intermediates that
// the backward would otherwise recompute (an opaque f32 buffer; gated_delta_cuda.h says what and
// how large); undefined on the CPU and without keep_for_backward. Passing it to
// gated_delta_backward with the same inputs skips the recomputation and gives the same bits.
struct GatedDeltaOut {
  Tensor o, final_state, saved;
};
GatedDeltaOut gated_delta_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& g, const Tensor& beta,
                                  const Tensor& initial_state /*may be undefined*/, double scale,
                                  int64_t chunk_size = 64 /*0 = recurrence*/,
                                  bool keep_for_backward = false);

// d_final_state may be undefined (zero). dinitial_state is undefined when initial_state is.
struct GatedDeltaGrads {
  Tensor dq, dk, dv, dg, dbeta, dinitial_state;
};
// Whether a training forward should keep its intermediates for the backward (keep_for_backward):
// yes unless the environment sets AMOR_GDN_RECOMPUTE=1 (recompute in the backward, the memory
// back). Read once per process; GdnMixer and bench-gdn ask it.
bool gated_delta_keep_for_backward_default();
GatedDeltaGrads gated_delta_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& g, const Tensor& beta,
                                     const Tensor& initial_state, double scale, const Tensor& do_,
                                     const Tensor& d_final_state, int64_t chunk_size = 64,
                                     const Tensor& saved = Tensor() /*GatedDeltaOut::saved*/);

// Decode: one step for every (b,h). q_t,k_t [B,H,K], v_t [B,H,V], g_t,beta_t [B,H];
// state [B,H,K,V] is updated in place. Returns o_t [B,H,V].
Tensor gated_delta_step(const Tensor& q_t, const Tensor& k_t, const Tensor& v_t, const Tensor& g_t,
                        const Tensor& beta_t, double scale, Tensor& state);

}  // namespace amor
