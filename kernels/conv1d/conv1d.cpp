#include "kernels/conv1d/conv1d.h"

#include "kernels/conv1d/conv1d_ref.h"
#include "kernels/core/check.h"

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

}  // namespace

Conv1dOutput conv1d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                            const Tensor& initial_state) {
  const char* op = "conv1d_forward";
  check_conv_args(op, x, weight, bias, initial_state);
  if (!x.is_cpu()) fail_no_cuda(op, x);
  int64_t B = x.size(0), T_ = x.size(1), C = x.size(2), K = weight.size(1);
  Conv1dOutput out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                   Tensor::empty({B, C, K - 1}, x.dtype(), x.device())};
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
  if (!x.is_cpu()) fail_no_cuda(op, x);
  Conv1dGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  g.dweight = Tensor::empty(weight.shape(), x.dtype(), x.device());
  if (bias.defined()) g.dbias = Tensor::empty(bias.shape(), x.dtype(), x.device());
  if (initial_state.defined())
    g.dinitial_state = Tensor::empty(initial_state.shape(), x.dtype(), x.device());
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
  if (!x_t.is_cpu()) fail_no_cuda(op, x_t);
  Tensor y = Tensor::empty({B, C}, x_t.dtype(), x_t.device());
  dispatch_float(op, x_t, [&](auto tag) {
    using T = decltype(tag);
    ref::conv1d_step(x_t.data<T>(), state.data<T>(), weight.data<T>(), ptr_or_null<T>(bias), silu,
                     y.data<T>(), B, C, K);
  });
  return y;
}

}  // namespace amor
