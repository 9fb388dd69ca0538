#include "kernels/rmsnorm/rmsnorm_gated.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/rmsnorm/rmsnorm_check.h"
#include "kernels/rmsnorm/rmsnorm_gated_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/rmsnorm/rmsnorm_cuda.h"
#endif

namespace amor {
namespace {

using rmsnorm_detail::check_eps;
using rmsnorm_detail::check_x_w;

// Checks x, z, w and the group size; returns the number of rows.
int64_t check_gated(const char* op, const Tensor& x, const Tensor& z, const Tensor& w,
                    int64_t group_size, double eps) {
  const int64_t rows = check_x_w(op, x, w);
  check_shape(op, "z", z, x.shape());
  check_eps(op, eps);
  AMOR_CHECK(group_size > 0 && x.size(-1) % group_size == 0,
             "{}: group_size {} does not divide the last dimension of x {}", op, group_size,
             x.str());
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    check_cuda_int_range(op, "the last dimension of x", x.size(-1));
  }
  return rows;
}

#ifdef AMOR_HAVE_CUDA
cuda::NormGate gate_of(bool norm_before_gate) {
  return norm_before_gate ? cuda::NormGate::NormBeforeGate : cuda::NormGate::GateBeforeNorm;
}
#endif

}  // namespace

RMSNormOut rmsnorm_gated_forward(const Tensor& x, const Tensor& z, const Tensor& w,
                                 int64_t group_size, double eps, bool norm_before_gate) {
  const char* op = "rmsnorm_gated_forward";
  check_float_args(op, {{"x", &x}, {"z", &z}, {"w", &w}});
  const int64_t rows = check_gated(op, x, z, w, group_size, eps);
  const int64_t d = x.size(-1);
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, RMSNormOut out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                                       Tensor::empty({rows, d / group_size}, DType::F32,
                                                     x.device())};
                 cuda::rmsnorm_forward(x.dtype(), gate_of(norm_before_gate), x.raw_data(),
                                       z.raw_data(), w.raw_data(), out.y.raw_data(),
                                       out.rstd.data<float>(), rows, d, group_size, eps);
                 return out);
  }
  RMSNormOut out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                 Tensor::empty({rows, d / group_size}, x.dtype(), x.device())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::rmsnorm_gated_forward(x.data<T>(), z.data<T>(), w.data<T>(), out.y.data<T>(),
                               out.rstd.data<T>(), rows, d, group_size, eps, norm_before_gate);
  });
  return out;
}

RMSNormGatedGrads rmsnorm_gated_backward(const Tensor& x, const Tensor& z, const Tensor& w,
                                         const Tensor& rstd, const Tensor& dy, int64_t group_size,
                                         double eps, bool norm_before_gate) {
  const char* op = "rmsnorm_gated_backward";
  check_float_args(op, {{"x", &x}, {"z", &z}, {"w", &w}, {"dy", &dy}});
  const int64_t rows = check_gated(op, x, z, w, group_size, eps);
  check_shape(op, "dy", dy, x.shape());
  const int64_t d = x.size(-1);
  if (rstd.defined()) {
    if (x.is_cpu()) {
      check_float_args(op, {{"x", &x}, {"rstd", &rstd}});
    } else {
      check_on_cuda(op, "rstd", rstd);
      check_cuda_dtype(op, "rstd", rstd, DType::F32, "the forward's f32 statistics");
    }
    check_shape(op, "rstd", rstd, {rows, d / group_size});
  }
  Tensor r = rstd.defined()
                 ? rstd
                 : rmsnorm_gated_forward(x, z, w, group_size, eps, norm_before_gate).rstd;
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, RMSNormGatedGrads g{Tensor::empty(x.shape(), x.dtype(), x.device()),
                                            Tensor::empty(x.shape(), x.dtype(), x.device()),
                                            Tensor::empty(w.shape(), DType::F32, x.device())};
                 Tensor scratch = Tensor::empty({cuda::rmsnorm_backward_scratch_floats(rows, d)},
                                                DType::F32, x.device());
                 cuda::rmsnorm_backward(x.dtype(), gate_of(norm_before_gate), x.raw_data(),
                                        z.raw_data(), w.raw_data(), r.data<float>(),
                                        dy.raw_data(), g.dx.raw_data(), g.dz.raw_data(),
                                        g.dw.data<float>(), scratch.data<float>(), rows, d,
                                        group_size);
                 return g);
  }
  RMSNormGatedGrads g{Tensor::empty(x.shape(), x.dtype(), x.device()),
                      Tensor::empty(x.shape(), x.dtype(), x.device()),
                      Tensor::empty(w.shape(), w.dtype(), w.device())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::rmsnorm_gated_backward(x.data<T>(), z.data<T>(), w.data<T>(), r.data<T>(), dy.data<T>(),
                                g.dx.data<T>(), g.dz.data<T>(), g.dw.data<T>(), rows, d, group_size,
                                norm_before_gate);
  });
  return g;
}

}  // namespace amor
