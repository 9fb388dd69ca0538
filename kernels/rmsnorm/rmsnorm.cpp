#include "kernels/rmsnorm/rmsnorm.h"

#include "kernels/core/check.h"
#include "kernels/rmsnorm/rmsnorm_check.h"
#include "kernels/rmsnorm/rmsnorm_ref.h"

namespace amor {

using rmsnorm_detail::check_eps;
using rmsnorm_detail::check_x_w;

RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& w, double eps) {
  const char* op = "rmsnorm_forward";
  check_float_args(op, {{"x", &x}, {"w", &w}});
  const int64_t rows = check_x_w(op, x, w);
  check_eps(op, eps);
  if (!x.is_cpu()) fail_no_cuda(op, x);
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
  check_float_args(op, {{"x", &x}, {"w", &w}, {"rstd", &rstd}, {"dy", &dy}});
  const int64_t rows = check_x_w(op, x, w);
  check_shape(op, "rstd", rstd, {rows});
  check_shape(op, "dy", dy, x.shape());
  if (!x.is_cpu()) fail_no_cuda(op, x);
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
