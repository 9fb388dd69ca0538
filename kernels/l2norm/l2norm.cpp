#include "kernels/l2norm/l2norm.h"

#include <cmath>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/l2norm/l2norm_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/l2norm/l2norm_cuda.h"
#endif

namespace amor {
namespace {

// x is [..., D] with D >= 1 (f32 or bf16 on cuda); returns the number of rows.
int64_t check_x(const char* op, const Tensor& x) {
  AMOR_CHECK(x.dim() >= 1 && x.size(-1) > 0,
             "{}: argument 'x' is {}, expected at least 1 dimension and a non-empty last one", op,
             x.str());
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    check_cuda_int_range(op, "the last dimension of x", x.size(-1));
  }
  return x.numel() / x.size(-1);
}

}  // namespace

L2NormOut l2norm_forward(const Tensor& x, double eps) {
  const char* op = "l2norm_forward";
  check_float_args(op, {{"x", &x}});
  const int64_t rows = check_x(op, x);
  AMOR_CHECK(std::isfinite(eps) && eps >= 0, "{}: eps must be finite and >= 0, got {}", op, eps);
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, L2NormOut out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                                      Tensor::empty({rows}, DType::F32, x.device())};
                 cuda::l2norm_forward(x.dtype(), x.raw_data(), out.y.raw_data(),
                                      out.rstd.data<float>(), rows, x.size(-1), eps);
                 return out);
  }
  L2NormOut out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                Tensor::empty({rows}, x.dtype(), x.device())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::l2norm_forward(x.data<T>(), out.y.data<T>(), out.rstd.data<T>(), rows, x.size(-1), eps);
  });
  return out;
}

Tensor l2norm_backward(const Tensor& x, const Tensor& rstd, const Tensor& dy) {
  const char* op = "l2norm_backward";
  if (x.defined() && !x.is_cpu()) {
    check_float_args(op, {{"x", &x}, {"dy", &dy}});
    check_on_cuda(op, "rstd", rstd);
    check_cuda_dtype(op, "rstd", rstd, DType::F32, "the forward's f32 statistics");
  } else {
    check_float_args(op, {{"x", &x}, {"rstd", &rstd}, {"dy", &dy}});
  }
  const int64_t rows = check_x(op, x);
  check_shape(op, "rstd", rstd, {rows});
  check_shape(op, "dy", dy, x.shape());
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
                 cuda::l2norm_backward(x.dtype(), x.raw_data(), rstd.data<float>(), dy.raw_data(),
                                       dx.raw_data(), rows, x.size(-1));
                 return dx);
  }
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::l2norm_backward(x.data<T>(), rstd.data<T>(), dy.data<T>(), dx.data<T>(), rows, x.size(-1));
  });
  return dx;
}

}  // namespace amor
