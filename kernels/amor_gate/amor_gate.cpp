#include "kernels/amor_gate/amor_gate.h"

#include <cmath>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/amor_gate/amor_gate_cuda.h"
#endif

namespace amor {
namespace {

// Entropies: f32/f64 on the cpu, f32 on cuda (what lm_head_entropy gives there).
void check_values(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  if (t.is_cpu()) {
    AMOR_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64,
               "{}: argument '{}' is {}; on the cpu it must be f32 or f64", op, name, t.str());
  } else {
    check_cuda_dtype(op, name, t, DType::F32, "entropies");
    check_cuda_int_range(op, "the number of entropies", t.numel());
  }
}

// An f64 vector of n elements on `like`'s device.
void check_f64_vector(const char* op, const char* name, const Tensor& t, int64_t n, const Tensor& like,
                      const char* like_name) {
  check_dtype(op, name, t, DType::F64);
  check_shape(op, name, t, {n});
  AMOR_CHECK(t.device() == like.device(), "{}: argument '{}' is {} but '{}' is {}: one device", op, name,
             t.str(), like_name, like.str());
}

}  // namespace

Tensor amor_entropy_stats(const Tensor& values) {
  const char* op = "amor_entropy_stats";
  check_values(op, "values", values);
  AMOR_CHECK(values.numel() > 0, "{}: argument 'values' is {}: no entropies to take statistics of", op,
             values.str());
  const int64_t n = values.numel();
  if (!values.is_cpu()) {
    Tensor out = Tensor::empty({2}, DType::F64, values.device());
    AMOR_ON_CUDA(op, values,
                 Tensor scratch = Tensor::empty({cuda::entropy_stats_scratch_bytes(n)}, DType::U8,
                                                values.device());
                 cuda::entropy_stats(values.data<float>(), n, scratch.raw_data(), out.data<double>()));
    return out;
  }
  Tensor out = Tensor::empty({2}, DType::F64);
  double* o = out.data<double>();
  dispatch_float(op, values, [&](auto tag) {
    using T = decltype(tag);
    o[0] = ref::lower_median(values.data<T>(), n);
    o[1] = ref::unbiased_std(values.data<T>(), n);
  });
  return out;
}

Tensor amor_gate_update(const Tensor& state, const Tensor& stats, const AmorGateRule& rule) {
  const char* op = "amor_gate_update";
  check_defined(op, "state", state);
  check_f64_vector(op, "state", state, ref::kAmorGateStateSize, state, "state");
  check_f64_vector(op, "stats", stats, 2, state, "state");
  Tensor out = Tensor::empty({ref::kAmorGateStateSize}, DType::F64, state.device());
  if (!state.is_cpu()) {
    AMOR_ON_CUDA(op, state,
                 cuda::amor_gate_update(state.data<double>(), stats.data<double>(), rule,
                                        out.data<double>()));
    return out;
  }
  out.copy_from(state);
  const double* st = stats.data<double>();
  ref::amor_gate_update(out.data<double>(), st[0], st[1], rule);
  return out;
}

Tensor amor_gate_state(double m, double s, const AmorGateRule& rule) {
  return Tensor::from_vector<double>({ref::kAmorGateStateSize}, {m, s, ref::amor_gate_tau(m, s, rule)});
}

Tensor amor_gate_mask(const Tensor& H, const Tensor& state) {
  const char* op = "amor_gate_mask";
  check_values(op, "H", H);
  check_defined(op, "state", state);
  check_f64_vector(op, "state", state, ref::kAmorGateStateSize, H, "H");
  Tensor gate = Tensor::empty(H.shape(), DType::U8, H.device());
  if (!H.is_cpu()) {
    AMOR_ON_CUDA(op, H,
                 cuda::amor_gate_mask(H.data<float>(), H.numel(), state.data<double>(),
                                      gate.data<uint8_t>()));
    return gate;
  }
  const double tau = state.data<double>()[ref::kGateTau];
  dispatch_float(op, H, [&](auto tag) {
    using T = decltype(tag);
    ref::amor_gate_mask(H.data<T>(), H.numel(), tau, gate.data<uint8_t>());
  });
  return gate;
}

}  // namespace amor
