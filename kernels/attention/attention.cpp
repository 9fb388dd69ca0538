#include "kernels/attention/attention.h"

#include <cmath>

#include "kernels/attention/attention_ref.h"
#include "kernels/core/check.h"

namespace amor {

namespace {

// Checks q, k, v, the optional gate and the scale; returns the dimensions and the scale to use.
ref::AttentionDims check_attention_args(const char* op, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& gate,
                                        std::optional<double> scale, double* scale_out) {
  check_dim(op, "q", q, 4);
  check_dim(op, "k", k, 4);
  check_float_args(op, {{"q", &q}, {"k", &k}, {"v", &v}});
  ref::AttentionDims n{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  check_shape(op, "k", k, {n.B, kAny, kAny, n.D});
  check_shape(op, "v", v, k.shape());
  AMOR_CHECK(n.Hkv >= 1 && n.H % n.Hkv == 0,
             "{}: q has {} heads and k has {}: the query heads must be a multiple of the kv heads "
             "(q is {}, k is {})",
             op, n.H, n.Hkv, q.str(), k.str());
  AMOR_CHECK(n.Tq <= n.Tk,
             "{}: q has {} positions but k has only {}: the queries must be the last Tq <= Tk "
             "positions (q is {}, k is {})",
             op, n.Tq, n.Tk, q.str(), k.str());
  if (gate.defined()) {
    check_dtype(op, "gate", gate, DType::U8);
    check_shape(op, "gate", gate, {n.B, n.Tq});
    AMOR_CHECK(gate.device() == q.device(),
               "{}: arguments 'q' ({}) and 'gate' ({}) are on different devices", op, q.str(),
               gate.str());
  }
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(n.D));
  AMOR_CHECK(std::isfinite(s), "{}: scale is {}, expected a finite number (q is {})", op, s,
             q.str());
  *scale_out = s;
  return n;
}

const uint8_t* gate_ptr(const Tensor& gate) {
  return gate.defined() ? gate.data<uint8_t>() : nullptr;
}

}  // namespace

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, std::optional<double> scale) {
  const char* op = "attention_forward";
  double s = 0;
  ref::AttentionDims n = check_attention_args(op, q, k, v, gate, scale, &s);
  if (!q.is_cpu()) fail_no_cuda(op, q);
  AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                      Tensor::empty({n.B, n.H, n.Tq}, q.dtype(), q.device())};
  dispatch_float(op, q, [&](auto tag) {
    using T = decltype(tag);
    ref::attention_forward(q.data<T>(), k.data<T>(), v.data<T>(), gate_ptr(gate),
                           static_cast<T>(s), out.o.data<T>(), out.lse.data<T>(), n);
  });
  return out;
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, const Tensor& o, const Tensor& lse,
                                  const Tensor& dout, std::optional<double> scale) {
  const char* op = "attention_backward";
  double s = 0;
  ref::AttentionDims n = check_attention_args(op, q, k, v, gate, scale, &s);
  check_float_args(op, {{"q", &q}, {"o", &o}, {"lse", &lse}, {"dout", &dout}});
  check_shape(op, "o", o, q.shape());
  check_shape(op, "lse", lse, {n.B, n.H, n.Tq});
  check_shape(op, "dout", dout, q.shape());
  if (!q.is_cpu()) fail_no_cuda(op, q);
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()),
                   Tensor::empty(k.shape(), q.dtype(), q.device()),
                   Tensor::empty(v.shape(), q.dtype(), q.device())};
  dispatch_float(op, q, [&](auto tag) {
    using T = decltype(tag);
    ref::attention_backward(q.data<T>(), k.data<T>(), v.data<T>(), gate_ptr(gate),
                            static_cast<T>(s), o.data<T>(), lse.data<T>(), dout.data<T>(),
                            g.dq.data<T>(), g.dk.data<T>(), g.dv.data<T>(), n);
  });
  return g;
}

}  // namespace amor
