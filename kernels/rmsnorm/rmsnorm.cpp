#include "kernels/rmsnorm/rmsnorm.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/rmsnorm/rmsnorm_check.h"
#include "kernels/rmsnorm/rmsnorm_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/rmsnorm/rmsnorm_cuda.h"
#endif

namespace amor {

using rmsnorm_detail::check_eps;
using rmsnorm_detail::check_x_w;

RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& w, double eps) {
  const char* op = "rmsnorm_forward";
  check_float_args(op, {{"x", &x}, {"w", &w}});
  const int64_t rows = check_x_w(op, x, w);
  check_eps(op, eps);
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    check_cuda_int_range(op, "the last dimension of x", x.size(-1));
    AMOR_ON_CUDA(op, x, RMSNormOut out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                                       Tensor::empty({rows}, DType::F32, x.device())};
                 cuda::rmsnorm_forward(x.dtype(), cuda::NormGate::None, x.raw_data(), nullptr,
                                       w.raw_data(), out.y.raw_data(), out.rstd.data<float>(),
                                       rows, x.size(-1), x.size(-1), eps);
                 return out);
  }
  RMSNormOut out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                 Tensor::empty({rows}, x.dtype(), x.device())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::rmsnorm_forward(x.data<T>(), w.data<T>(), out.y.data<T>(), out.rstd.data<T>(), rows,
                         x.size(-1), eps);
  });
  return out;
}

RMSNormGrads rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd,
                              const Tensor& dy) {
  const char* op = "rmsnorm_backward";
  if (x.defined() && !x.is_cpu()) {
    check_float_args(op, {{"x", &x}, {"w", &w}, {"dy", &dy}});
    check_on_cuda(op, "rstd", rstd);
    check_cuda_dtype(op, "rstd", rstd, DType::F32, "the forward's f32 statistics");
  } else {
    check_float_args(op, {{"x", &x}, {"w", &w}, {"rstd", &rstd}, {"dy", &dy}});
  }
  const int64_t rows = check_x_w(op, x, w);
  check_shape(op, "rstd", rstd, {rows});
  check_shape(op, "dy", dy, x.shape());
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    check_cuda_int_range(op, "the last dimension of x", x.size(-1));
    AMOR_ON_CUDA(op, x, const int64_t d = x.size(-1);
                 RMSNormGrads g{Tensor::empty(x.shape(), x.dtype(), x.device()),
                                Tensor::empty(w.shape(), DType::F32, x.device())};
                 Tensor scratch = Tensor::empty({cuda::rmsnorm_backward_scratch_floats(rows, d)},
                                                DType::F32, x.device());
                 cuda::rmsnorm_backward(x.dtype(), cuda::NormGate::None, x.raw_data(), nullptr,
                                        w.raw_data(), rstd.data<float>(), dy.raw_data(),
                                        g.dx.raw_data(), nullptr, g.dw.data<float>(),
                                        scratch.data<float>(), rows, d, d);
                 return g);
  }
  RMSNormGrads g{Tensor::empty(x.shape(), x.dtype(), x.device()),
                 Tensor::empty(w.shape(), w.dtype(), w.device())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::rmsnorm_backward(x.data<T>(), w.data<T>(), rstd.data<T>(), dy.data<T>(), g.dx.data<T>(),
                          g.dw.data<T>(), rows, x.size(-1));
  });
  return g;
}

}  // namespace amor
