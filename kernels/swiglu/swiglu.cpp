#include "kernels/swiglu/swiglu.h"

#include "kernels/core/check.h"
#include "kernels/swiglu/swiglu_ref.h"

namespace amor {

Tensor swiglu_forward(const Tensor& g, const Tensor& u) {
  const char* op = "swiglu_forward";
  check_float_args(op, {{"g", &g}, {"u", &u}});
  check_shape(op, "u", u, g.shape());
  if (!g.is_cpu()) fail_no_cuda(op, g);
  Tensor h = Tensor::empty(g.shape(), g.dtype(), g.device());
  dispatch_float(op, g, [&](auto t) {
    using T = decltype(t);
    ref::swiglu_forward(g.data<T>(), u.data<T>(), h.data<T>(), g.numel());
  });
  return h;
}

SwigluGrads swiglu_backward(const Tensor& g, const Tensor& u, const Tensor& dh) {
  const char* op = "swiglu_backward";
  check_float_args(op, {{"g", &g}, {"u", &u}, {"dh", &dh}});
  check_shape(op, "u", u, g.shape());
  check_shape(op, "dh", dh, g.shape());
  if (!g.is_cpu()) fail_no_cuda(op, g);
  SwigluGrads out{Tensor::empty(g.shape(), g.dtype(), g.device()),
                  Tensor::empty(g.shape(), g.dtype(), g.device())};
  dispatch_float(op, g, [&](auto t) {
    using T = decltype(t);
    ref::swiglu_backward(g.data<T>(), u.data<T>(), dh.data<T>(), out.dg.data<T>(),
                         out.du.data<T>(), g.numel());
  });
  return out;
}

}  // namespace amor
