#include "kernels/swiglu/swiglu.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/swiglu/swiglu_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/swiglu/swiglu_cuda.h"
#endif

namespace amor {

// On cuda every tensor is f32 or bf16 (one dtype for all arguments and results).
Tensor swiglu_forward(const Tensor& g, const Tensor& u) {
  const char* op = "swiglu_forward";
  check_float_args(op, {{"g", &g}, {"u", &u}});
  check_shape(op, "u", u, g.shape());
  Tensor h = Tensor::empty(g.shape(), g.dtype(), g.device());
  if (!g.is_cpu()) {
    check_cuda_storage(op, "g", g);
    AMOR_ON_CUDA(op, g, cuda::swiglu_forward(g.dtype(), g.raw_data(), u.raw_data(), h.raw_data(),
                                             g.numel());
                 return h);
  }
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
  SwigluGrads out{Tensor::empty(g.shape(), g.dtype(), g.device()),
                  Tensor::empty(g.shape(), g.dtype(), g.device())};
  if (!g.is_cpu()) {
    check_cuda_storage(op, "g", g);
    AMOR_ON_CUDA(op, g, cuda::swiglu_backward(g.dtype(), g.raw_data(), u.raw_data(), dh.raw_data(),
                                              out.dg.raw_data(), out.du.raw_data(), g.numel());
                 return out);
  }
  dispatch_float(op, g, [&](auto t) {
    using T = decltype(t);
    ref::swiglu_backward(g.data<T>(), u.data<T>(), dh.data<T>(), out.dg.data<T>(),
                         out.du.data<T>(), g.numel());
  });
  return out;
}

}  // namespace amor
