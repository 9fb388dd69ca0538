#include "kernels/linear/linear.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/linear/gemm_cpu.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/linear/gemm_cuda.h"
#endif

namespace amor {
namespace {

// x is [..., in] with at least one dimension; w is [out, in].
void check_x_w(const char* op, const Tensor& x, const Tensor& w) {
  check_defined(op, "x", x);
  AMOR_CHECK(x.dim() >= 1, "{}: argument 'x' is {}, expected at least 1 dimension", op, x.str());
  check_shape(op, "w", w, {kAny, x.size(-1)});
}

// The number of rows of x viewed as [rows, in] (the product of all but the last dimension).
int64_t leading_rows(const Tensor& x) {
  return shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
}

Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

}  // namespace

Tensor linear_forward(const Tensor& x, const Tensor& w) {
  const char* op = "linear_forward";
  check_float_args(op, {{"x", &x}, {"w", &w}});
  check_x_w(op, x, w);
  const int64_t in = w.size(1), out = w.size(0), rows = leading_rows(x);
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    // y[rows,out] = x[rows,in] w[out,in]^T, in x's dtype
    AMOR_ON_CUDA(op, x, Tensor y = Tensor::empty(with_last(x.shape(), out), x.dtype(), x.device());
                 cuda::gemm(x.dtype(), x.dtype(), false, true, rows, out, in, 1.0f, x.raw_data(),
                            w.raw_data(), 0.0f, y.raw_data());
                 return y);
  }
  Tensor y = Tensor::empty(with_last(x.shape(), out), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    gemm_cpu<T>(false, true, rows, out, in, T(1), x.data<T>(), w.data<T>(), T(0), y.data<T>());
  });
  return y;
}

LinearGrads linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, bool need_dx) {
  const char* op = "linear_backward";
  check_float_args(op, {{"x", &x}, {"w", &w}, {"dy", &dy}});
  check_x_w(op, x, w);
  const int64_t in = w.size(1), out = w.size(0);
  check_shape(op, "dy", dy, with_last(x.shape(), out));
  const int64_t rows = leading_rows(x);
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    // dx[rows,in] = dy[rows,out] w[out,in] in x's dtype; dw[out,in] = dy^T x in f32 (design §2).
    AMOR_ON_CUDA(op, x, LinearGrads g;
                 g.dw = Tensor::empty(w.shape(), DType::F32, w.device());
                 if (need_dx) {
                   g.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
                   cuda::gemm(x.dtype(), x.dtype(), false, false, rows, in, out, 1.0f,
                              dy.raw_data(), w.raw_data(), 0.0f, g.dx.raw_data());
                 }
                 cuda::gemm(x.dtype(), DType::F32, true, false, out, in, rows, 1.0f, dy.raw_data(),
                            x.raw_data(), 0.0f, g.dw.raw_data());
                 return g);
  }
  LinearGrads g;
  g.dw = Tensor::empty(w.shape(), w.dtype(), w.device());
  if (need_dx) g.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    // dx[N,in] = dy[N,out] W[out,in];  dW[out,in] = dy^T[out,N] x[N,in]
    if (need_dx)
      gemm_cpu<T>(false, false, rows, in, out, T(1), dy.data<T>(), w.data<T>(), T(0),
                  g.dx.data<T>());
    gemm_cpu<T>(true, false, out, in, rows, T(1), dy.data<T>(), x.data<T>(), T(0), g.dw.data<T>());
  });
  return g;
}

}  // namespace amor
