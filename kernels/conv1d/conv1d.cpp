#include "kernels/conv1d/conv1d.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/conv1d/conv1d_ref.h"
#include "kernels/core/check.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/conv1d/conv1d_cuda.h"
#endif

namespace amor {

namespace {

// Checks x, weight and the optional bias / initial state of the full-sequence forms.
void check_conv_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& initial_state) {
  check_dim(op, "x", x, 3);
  check_float_args(op, {{"x", &x}, {"weight", &weight}});
  int64_t B = x.size(0), C = x.size(2);
  check_shape(op, "weight", weight, {C, kAny});
  AMOR_CHECK(weight.size(1) >= 1, "{}: argument 'weight' is {}, expected a kernel size K >= 1", op,
             weight.str());
  int64_t K = weight.size(1);
  if (bias.defined()) {
    check_float_args(op, {{"x", &x}, {"bias", &bias}});
    check_shape(op, "bias", bias, {C});
  }
  if (initial_state.defined()) {
    check_float_args(op, {{"x", &x}, {"initial_state", &initial_state}});
    check_shape(op, "initial_state", initial_state, {B, C, K - 1});
  }
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

#ifdef AMOR_HAVE_CUDA
const void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// What the cuda kernels handle: f32/bf16 storage, K up to kConv1dMaxK (the window is held in
// registers), and grid dimensions within CUDA's limits.
void check_cuda_conv(const char* op, const Tensor& x, int64_t B, int64_t T, int64_t K) {
  check_cuda_storage(op, "x", x);
  AMOR_CHECK(K <= cuda::kConv1dMaxK, "{}: kernel size K={} is not supported on cuda (K <= {})", op,
             K, cuda::kConv1dMaxK);
  AMOR_CHECK(B <= 65535 && T <= 65535 * int64_t(64),
             "{}: x {} is too large for the cuda kernels (B <= 65535, T <= {})", op, x.str(),
             65535 * int64_t(64));
}
#endif

}  // namespace

Conv1dOutput conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                            const Tensor& initial_state) {
  const char* op = "conv1d_forward";
  check_conv_args(op, x, weight, bias, initial_state);
  int64_t B = x.size(0), T_ = x.size(1), C = x.size(2), K = weight.size(1);
  Conv1dOutput out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                   Tensor::empty({B, C, K - 1}, x.dtype(), x.device())};
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, check_cuda_conv(op, x, B, T_, K);
                 cuda::conv1d_forward(x.dtype(), x.raw_data(), weight.raw_data(),
                                      raw_or_null(bias), raw_or_null(initial_state), silu,
                                      out.y.raw_data(), out.final_state.raw_data(), B, T_, C, K);
                 return out);
  }
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::conv1d_forward(x.data<T>(), weight.data<T>(), ptr_or_null<T>(bias),
                        ptr_or_null<T>(initial_state), silu, out.y.data<T>(),
                        out.final_state.data<T>(), B, T_, C, K);
  });
  return out;
}

Conv1dGrads conv1d_backward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                            const Tensor& initial_state, const Tensor& dy,
                            const Tensor& dfinal_state) {
  const char* op = "conv1d_backward";
  check_conv_args(op, x, weight, bias, initial_state);
  check_float_args(op, {{"x", &x}, {"dy", &dy}});
  check_shape(op, "dy", dy, x.shape());
  int64_t B = x.size(0), T_ = x.size(1), C = x.size(2), K = weight.size(1);
  if (dfinal_state.defined()) {
    check_float_args(op, {{"x", &x}, {"dfinal_state", &dfinal_state}});
    check_shape(op, "dfinal_state", dfinal_state, {B, C, K - 1});
  }
  // Parameter gradients are f32 on cuda (reduced in f32), in x's dtype on the cpu.
  const DType param_grad = x.is_cpu() ? x.dtype() : DType::F32;
  Conv1dGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  g.dweight = Tensor::empty(weight.shape(), param_grad, x.device());
  if (bias.defined()) g.dbias = Tensor::empty(bias.shape(), param_grad, x.device());
  if (initial_state.defined())
    g.dinitial_state = Tensor::empty(initial_state.shape(), x.dtype(), x.device());
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, check_cuda_conv(op, x, B, T_, K);
                 Tensor scratch = Tensor::empty(
                     {cuda::conv1d_backward_scratch_floats(B, T_, C, K)}, DType::F32, x.device());
                 cuda::conv1d_backward(
                     x.dtype(), x.raw_data(), weight.raw_data(), raw_or_null(bias),
                     raw_or_null(initial_state), silu, dy.raw_data(), raw_or_null(dfinal_state),
                     g.dx.raw_data(), g.dweight.data<float>(),
                     g.dbias.defined() ? g.dbias.data<float>() : nullptr,
                     g.dinitial_state.defined() ? g.dinitial_state.raw_data() : nullptr,
                     scratch.data<float>(), B, T_, C, K);
                 return g);
  }
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    T* dbias = g.dbias.defined() ? g.dbias.data<T>() : nullptr;
    T* ds0 = g.dinitial_state.defined() ? g.dinitial_state.data<T>() : nullptr;
    ref::conv1d_backward(x.data<T>(), weight.data<T>(), ptr_or_null<T>(bias),
                         ptr_or_null<T>(initial_state), silu, dy.data<T>(),
                         ptr_or_null<T>(dfinal_state), g.dx.data<T>(), g.dweight.data<T>(), dbias,
                         ds0, B, T_, C, K);
  });
  return g;
}

Tensor conv1d_step(const Tensor& x_t, Tensor& state, const Tensor& weight, const Tensor& bias,
                   bool silu) {
  const char* op = "conv1d_step";
  check_dim(op, "x_t", x_t, 2);
  check_float_args(op, {{"x_t", &x_t}, {"state", &state}, {"weight", &weight}});
  int64_t B = x_t.size(0), C = x_t.size(1);
  check_shape(op, "weight", weight, {C, kAny});
  AMOR_CHECK(weight.size(1) >= 1, "{}: argument 'weight' is {}, expected a kernel size K >= 1", op,
             weight.str());
  int64_t K = weight.size(1);
  check_shape(op, "state", state, {B, C, K - 1});
  if (bias.defined()) {
    check_float_args(op, {{"x_t", &x_t}, {"bias", &bias}});
    check_shape(op, "bias", bias, {C});
  }
  Tensor y = Tensor::empty({B, C}, x_t.dtype(), x_t.device());
  if (!x_t.is_cpu()) {
    AMOR_ON_CUDA(op, x_t, check_cuda_storage(op, "x_t", x_t);
                 cuda::conv1d_step(x_t.dtype(), x_t.raw_data(), state.raw_data(),
                                   weight.raw_data(), raw_or_null(bias), silu, y.raw_data(), B, C,
                                   K);
                 return y);
  }
  dispatch_float(op, x_t, [&](auto tag) {
    using T = decltype(tag);
    ref::conv1d_step(x_t.data<T>(), state.data<T>(), weight.data<T>(), ptr_or_null<T>(bias), silu,
                     y.data<T>(), B, C, K);
  });
  return y;
}

}  // namespace amor
