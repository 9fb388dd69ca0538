#include "kernels/gated_delta/gated_delta.h"

#include <cmath>

#include "kernels/core/check.h"
#include "kernels/gated_delta/gated_delta_chunked_ref.h"
#include "kernels/gated_delta/gated_delta_recurrent_ref.h"

namespace amor {
namespace {

// Checks the scan's inputs (shared by forward and backward) and returns their dimensions.
ref::GatedDeltaDims check_scan_args(const char* op, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& g, const Tensor& beta,
                                    const Tensor& initial_state, double scale, int64_t chunk_size) {
  check_float_args(op, {{"q", &q}, {"k", &k}, {"v", &v}, {"g", &g}, {"beta", &beta}});
  check_dim(op, "q", q, 4);
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), K = q.size(3);
  check_shape(op, "k", k, q.shape());
  check_shape(op, "v", v, {B, T, H, kAny});
  const int64_t V = v.size(3);
  check_shape(op, "g", g, {B, T, H});
  check_shape(op, "beta", beta, {B, T, H});
  if (initial_state.defined()) {
    check_float_args(op, {{"q", &q}, {"initial_state", &initial_state}});
    check_shape(op, "initial_state", initial_state, {B, H, K, V});
  }
  AMOR_CHECK(std::isfinite(scale), "{}: scale is {}, expected a finite number", op, scale);
  AMOR_CHECK(chunk_size >= 0,
             "{}: chunk_size is {}, expected 0 (step-by-step recurrence) or a chunk length > 0", op,
             chunk_size);
  if (!q.is_cpu()) fail_no_cuda(op, q);
  return {B, T, H, K, V};
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

GatedDeltaOut gated_delta_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& g, const Tensor& beta, const Tensor& initial_state,
                                  double scale, int64_t chunk_size) {
  const char* op = "gated_delta_forward";
  const ref::GatedDeltaDims d =
      check_scan_args(op, q, k, v, g, beta, initial_state, scale, chunk_size);
  GatedDeltaOut out{Tensor::empty({d.B, d.T, d.H, d.V}, q.dtype(), q.device()),
                    Tensor::empty({d.B, d.H, d.K, d.V}, q.dtype(), q.device())};
  dispatch_float(op, q, [&](auto tag) {
    using T = decltype(tag);
    const T* s0 = data_or_null<T>(initial_state);
    if (chunk_size == 0)
      ref::gated_delta_recurrent_forward(q.data<T>(), k.data<T>(), v.data<T>(), g.data<T>(),
                                         beta.data<T>(), s0, T(scale), out.o.data<T>(),
                                         out.final_state.data<T>(), d);
    else
      ref::gated_delta_chunked_forward(q.data<T>(), k.data<T>(), v.data<T>(), g.data<T>(),
                                       beta.data<T>(), s0, T(scale), chunk_size, out.o.data<T>(),
                                       out.final_state.data<T>(), d);
  });
  return out;
}

GatedDeltaGrads gated_delta_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& g, const Tensor& beta,
                                     const Tensor& initial_state, double scale, const Tensor& do_,
                                     const Tensor& d_final_state, int64_t chunk_size) {
  const char* op = "gated_delta_backward";
  const ref::GatedDeltaDims d =
      check_scan_args(op, q, k, v, g, beta, initial_state, scale, chunk_size);
  check_float_args(op, {{"q", &q}, {"do", &do_}});
  check_shape(op, "do", do_, {d.B, d.T, d.H, d.V});
  if (d_final_state.defined()) {
    check_float_args(op, {{"q", &q}, {"d_final_state", &d_final_state}});
    check_shape(op, "d_final_state", d_final_state, {d.B, d.H, d.K, d.V});
  }
  GatedDeltaGrads gr{Tensor::empty(q.shape(), q.dtype(), q.device()),
                     Tensor::empty(k.shape(), q.dtype(), q.device()),
                     Tensor::empty(v.shape(), q.dtype(), q.device()),
                     Tensor::empty(g.shape(), q.dtype(), q.device()),
                     Tensor::empty(beta.shape(), q.dtype(), q.device()),
                     {}};
  if (initial_state.defined())
    gr.dinitial_state = Tensor::empty(initial_state.shape(), q.dtype(), q.device());
  dispatch_float(op, q, [&](auto tag) {
    using T = decltype(tag);
    const T* s0 = data_or_null<T>(initial_state);
    const T* dsf = data_or_null<T>(d_final_state);
    T* ds0 = gr.dinitial_state.defined() ? gr.dinitial_state.data<T>() : nullptr;
    if (chunk_size == 0)
      ref::gated_delta_recurrent_backward(q.data<T>(), k.data<T>(), v.data<T>(), g.data<T>(),
                                          beta.data<T>(), s0, T(scale), do_.data<T>(), dsf,
                                          gr.dq.data<T>(), gr.dk.data<T>(), gr.dv.data<T>(),
                                          gr.dg.data<T>(), gr.dbeta.data<T>(), ds0, d);
    else
      ref::gated_delta_chunked_backward(q.data<T>(), k.data<T>(), v.data<T>(), g.data<T>(),
                                        beta.data<T>(), s0, T(scale), chunk_size, do_.data<T>(),
                                        dsf, gr.dq.data<T>(), gr.dk.data<T>(), gr.dv.data<T>(),
                                        gr.dg.data<T>(), gr.dbeta.data<T>(), ds0, d);
  });
  return gr;
}

Tensor gated_delta_step(const Tensor& q_t, const Tensor& k_t, const Tensor& v_t, const Tensor& g_t,
                        const Tensor& beta_t, double scale, Tensor& state) {
  const char* op = "gated_delta_step";
  check_float_args(op, {{"q_t", &q_t},
                        {"k_t", &k_t},
                        {"v_t", &v_t},
                        {"g_t", &g_t},
                        {"beta_t", &beta_t},
                        {"state", &state}});
  check_dim(op, "q_t", q_t, 3);
  const int64_t B = q_t.size(0), H = q_t.size(1), K = q_t.size(2);
  check_shape(op, "k_t", k_t, q_t.shape());
  check_shape(op, "v_t", v_t, {B, H, kAny});
  const int64_t V = v_t.size(2);
  check_shape(op, "g_t", g_t, {B, H});
  check_shape(op, "beta_t", beta_t, {B, H});
  check_shape(op, "state", state, {B, H, K, V});
  AMOR_CHECK(std::isfinite(scale), "{}: scale is {}, expected a finite number", op, scale);
  if (!q_t.is_cpu()) fail_no_cuda(op, q_t);
  Tensor o = Tensor::empty({B, H, V}, q_t.dtype(), q_t.device());
  dispatch_float(op, q_t, [&](auto tag) {
    using T = decltype(tag);
    ref::gated_delta_step(q_t.data<T>(), k_t.data<T>(), v_t.data<T>(), g_t.data<T>(),
                          beta_t.data<T>(), T(scale), state.data<T>(), o.data<T>(), B, H, K, V);
  });
  return o;
}

}  // namespace amor
