#include "kernels/gated_delta/gated_delta.h"

#include <cmath>
#include <string>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/core/env_switch.h"
#include "kernels/gated_delta/gated_delta_chunked_ref.h"
#include "kernels/gated_delta/gated_delta_recurrent_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/gated_delta/gated_delta_cuda.h"
#endif

// On cuda (gated_delta_cuda.h): q, k, v, do in f32 or bf16 (one dtype); g and beta f32 or that
// dtype (one dtype for both); initial_state and d_final_state f32 or that dtype; final_state,
// dinitial_state, dg, dbeta and the decode state in f32. chunk_size 0 (the recurrence, the same
// function) runs the chunked kernels with chunks of 64; chunk_size <= 64; B, T, H >= 1.

namespace amor {
namespace {

// On cuda, `t` may be f32 or have x's dtype (gates and states next to bf16 activations).
void check_f32_or_like(const char* op, const char* name, const Tensor& t, const char* xname,
                       const Tensor& x) {
  check_defined(op, name, t);
  AMOR_CHECK(t.device() == x.device(), "{}: arguments '{}' ({}) and '{}' ({}) are on different "
             "devices", op, xname, x.str(), name, t.str());
  AMOR_CHECK(t.dtype() == DType::F32 || t.dtype() == x.dtype(),
             "{}: argument '{}' is {}; on cuda it must be f32 or {}'s dtype {}", op, name, t.str(),
             xname, dtype_name(x.dtype()));
}

// Checks the scan's inputs (shared by forward and backward) and returns their dimensions.
ref::GatedDeltaDims check_scan_args(const char* op, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& g, const Tensor& beta,
                                    const Tensor& initial_state, double scale, int64_t chunk_size) {
  if (q.is_cpu()) {
    check_float_args(op, {{"q", &q}, {"k", &k}, {"v", &v}, {"g", &g}, {"beta", &beta}});
  } else {
    check_float_args(op, {{"q", &q}, {"k", &k}, {"v", &v}});
    check_cuda_storage(op, "q", q);
    check_f32_or_like(op, "g", g, "q", q);
    check_float_args(op, {{"g", &g}, {"beta", &beta}});
  }
  check_dim(op, "q", q, 4);
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), K = q.size(3);
  check_shape(op, "k", k, q.shape());
  check_shape(op, "v", v, {B, T, H, kAny});
  const int64_t V = v.size(3);
  check_shape(op, "g", g, {B, T, H});
  check_shape(op, "beta", beta, {B, T, H});
  if (initial_state.defined()) {
    if (q.is_cpu())
      check_float_args(op, {{"q", &q}, {"initial_state", &initial_state}});
    else
      check_f32_or_like(op, "initial_state", initial_state, "q", q);
    check_shape(op, "initial_state", initial_state, {B, H, K, V});
  }
  AMOR_CHECK(std::isfinite(scale), "{}: scale is {}, expected a finite number", op, scale);
  AMOR_CHECK(chunk_size >= 0,
             "{}: chunk_size is {}, expected 0 (step-by-step recurrence) or a chunk length > 0", op,
             chunk_size);
  return {B, T, H, K, V};
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

#ifdef AMOR_HAVE_CUDA
const void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
bool is_f32(const Tensor& t) { return t.defined() && t.dtype() == DType::F32; }

// The cuda kernels' shape: chunk 0 (recurrence) runs as chunks of 64; what they cannot handle
// (chunk > 64, empty dimensions, shared memory beyond the per-block limit) is an error here.
cuda::GdnShape cuda_shape(const char* op, const ref::GatedDeltaDims& d, int64_t chunk_size,
                          DType t) {
  const int64_t L = chunk_size == 0 ? cuda::kGdnMaxChunk : chunk_size;
  AMOR_CHECK(L <= cuda::kGdnMaxChunk, "{}: chunk_size is {}; on cuda it must be <= {}", op,
             chunk_size, cuda::kGdnMaxChunk);
  AMOR_CHECK(d.B >= 1 && d.T >= 1 && d.H >= 1 && d.K >= 1 && d.V >= 1,
             "{}: B={} T={} H={} K={} V={}: on cuda every dimension must be >= 1", op, d.B, d.T,
             d.H, d.K, d.V);
  AMOR_CHECK(d.B <= 65535 && d.H <= 65535,
             "{}: B={} H={}: on cuda B and H must be <= 65535 (grid dimensions)", op, d.B, d.H);
  const cuda::GdnShape s{d.B, d.T, d.H, d.K, d.V, L};
  const int64_t smem = cuda::gated_delta_max_smem_bytes(t, s);
  AMOR_CHECK(smem <= cuda::kGdnMaxSmemBytes,
             "{}: K={} V={} chunk={} need {} bytes of shared memory per block on cuda (max {})",
             op, d.K, d.V, L, smem, cuda::kGdnMaxSmemBytes);
  check_cuda_int_range(op, "K*V", d.K * d.V);
  return s;
}
#endif

}  // namespace

GatedDeltaOut gated_delta_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& g, const Tensor& beta, const Tensor& initial_state,
                                  double scale, int64_t chunk_size, bool keep_for_backward) {
  const char* op = "gated_delta_forward";
  const ref::GatedDeltaDims d =
      check_scan_args(op, q, k, v, g, beta, initial_state, scale, chunk_size);
  if (!q.is_cpu()) {
    AMOR_ON_CUDA(op, q, const cuda::GdnShape s = cuda_shape(op, d, chunk_size, q.dtype());
                 GatedDeltaOut out{Tensor::empty({d.B, d.T, d.H, d.V}, q.dtype(), q.device()),
                                   Tensor::empty({d.B, d.H, d.K, d.V}, DType::F32, q.device()),
                                   {}};
                 if (keep_for_backward) out.saved = Tensor::empty(
                     {cuda::gated_delta_saved_floats(s)}, DType::F32, q.device());
                 Tensor scratch = Tensor::empty(
                     {cuda::gated_delta_forward_scratch_floats(s, keep_for_backward)}, DType::F32,
                     q.device());
                 cuda::gated_delta_forward(
                     q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(), g.raw_data(),
                     beta.raw_data(), is_f32(g), raw_or_null(initial_state),
                     is_f32(initial_state), float(scale), out.o.raw_data(),
                     out.final_state.data<float>(), scratch.data<float>(), s, 0,
                     keep_for_backward ? out.saved.data<float>() : nullptr);
                 return out);
  }
  GatedDeltaOut out{Tensor::empty({d.B, d.T, d.H, d.V}, q.dtype(), q.device()),
                    Tensor::empty({d.B, d.H, d.K, d.V}, q.dtype(), q.device()),
                    {}};
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

bool gated_delta_keep_for_backward_default() {
  static const bool keep = env_choice("AMOR_GDN_RECOMPUTE", {"0", "1"}, "0") == "0";
  return keep;
}

GatedDeltaGrads gated_delta_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& g, const Tensor& beta,
                                     const Tensor& initial_state, double scale, const Tensor& do_,
                                     const Tensor& d_final_state, int64_t chunk_size,
                                     const Tensor& saved) {
  const char* op = "gated_delta_backward";
  const ref::GatedDeltaDims d =
      check_scan_args(op, q, k, v, g, beta, initial_state, scale, chunk_size);
  check_float_args(op, {{"q", &q}, {"do", &do_}});
  check_shape(op, "do", do_, {d.B, d.T, d.H, d.V});
  if (d_final_state.defined()) {
    if (q.is_cpu())
      check_float_args(op, {{"q", &q}, {"d_final_state", &d_final_state}});
    else
      check_f32_or_like(op, "d_final_state", d_final_state, "q", q);
    check_shape(op, "d_final_state", d_final_state, {d.B, d.H, d.K, d.V});
  }
  if (!q.is_cpu()) {
    AMOR_ON_CUDA(
        op, q, const cuda::GdnShape s = cuda_shape(op, d, chunk_size, q.dtype());
        GatedDeltaGrads gr{Tensor::empty(q.shape(), q.dtype(), q.device()),
                           Tensor::empty(k.shape(), q.dtype(), q.device()),
                           Tensor::empty(v.shape(), q.dtype(), q.device()),
                           Tensor::empty(g.shape(), DType::F32, q.device()),
                           Tensor::empty(beta.shape(), DType::F32, q.device()),
                           {}};
        if (initial_state.defined())
            gr.dinitial_state = Tensor::empty(initial_state.shape(), DType::F32, q.device());
        if (saved.defined()) {
          AMOR_CHECK(saved.dtype() == DType::F32 && saved.device() == q.device() &&
                         saved.numel() == cuda::gated_delta_saved_floats(s),
                     "{}: saved must be the f32 buffer that gated_delta_forward(keep_for_backward)"
                     " returned for these inputs ({} elements on their device)",
                     op, cuda::gated_delta_saved_floats(s));
        }
        Tensor scratch = Tensor::empty(
            {cuda::gated_delta_backward_scratch_floats(s, saved.defined())}, DType::F32,
            q.device());
        cuda::gated_delta_backward(
            q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(), g.raw_data(), beta.raw_data(),
            is_f32(g), raw_or_null(initial_state), is_f32(initial_state),
            raw_or_null(d_final_state), is_f32(d_final_state), float(scale), do_.raw_data(),
            gr.dq.raw_data(), gr.dk.raw_data(), gr.dv.raw_data(), gr.dg.data<float>(),
            gr.dbeta.data<float>(),
            gr.dinitial_state.defined() ? gr.dinitial_state.data<float>() : nullptr,
            scratch.data<float>(), s, 0, saved.defined() ? saved.data<float>() : nullptr);
        return gr);
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
  if (q_t.is_cpu()) {
    check_float_args(op, {{"q_t", &q_t},
                          {"k_t", &k_t},
                          {"v_t", &v_t},
                          {"g_t", &g_t},
                          {"beta_t", &beta_t},
                          {"state", &state}});
  } else {
    check_float_args(op, {{"q_t", &q_t}, {"k_t", &k_t}, {"v_t", &v_t}});
    check_cuda_storage(op, "q_t", q_t);
    check_f32_or_like(op, "g_t", g_t, "q_t", q_t);
    check_float_args(op, {{"g_t", &g_t}, {"beta_t", &beta_t}});
    check_on_cuda(op, "state", state);
    check_cuda_dtype(op, "state", state, DType::F32, "the decode state accumulates in f32");
  }
  check_dim(op, "q_t", q_t, 3);
  const int64_t B = q_t.size(0), H = q_t.size(1), K = q_t.size(2);
  check_shape(op, "k_t", k_t, q_t.shape());
  check_shape(op, "v_t", v_t, {B, H, kAny});
  const int64_t V = v_t.size(2);
  check_shape(op, "g_t", g_t, {B, H});
  check_shape(op, "beta_t", beta_t, {B, H});
  check_shape(op, "state", state, {B, H, K, V});
  AMOR_CHECK(std::isfinite(scale), "{}: scale is {}, expected a finite number", op, scale);
  Tensor o = Tensor::empty({B, H, V}, q_t.dtype(), q_t.device());
  if (!q_t.is_cpu()) {
    AMOR_ON_CUDA(op, q_t, check_cuda_int_range(op, "B*H", B * H);
                 cuda::gated_delta_step(q_t.dtype(), q_t.raw_data(), k_t.raw_data(),
                                        v_t.raw_data(), g_t.raw_data(), beta_t.raw_data(),
                                        is_f32(g_t), float(scale), state.data<float>(),
                                        o.raw_data(), B, H, K, V);
                 return o);
  }
  dispatch_float(op, q_t, [&](auto tag) {
    using T = decltype(tag);
    ref::gated_delta_step(q_t.data<T>(), k_t.data<T>(), v_t.data<T>(), g_t.data<T>(),
                          beta_t.data<T>(), T(scale), state.data<T>(), o.data<T>(), B, H, K, V);
  });
  return o;
}

}  // namespace amor
