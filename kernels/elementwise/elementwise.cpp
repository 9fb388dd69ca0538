#include "kernels/elementwise/elementwise.h"

#include "kernels/core/check.h"
#include "kernels/elementwise/elementwise_ref.h"

namespace amor {

namespace {

// Checks that all tensors are float, on one device and of a's shape; CPU only for now.
void check_same(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> args) {
  check_float_args(op, args);
  const Tensor& first = *args.begin()->second;
  for (auto& [name, t] : args) check_shape(op, name, *t, first.shape());
  if (!first.is_cpu()) fail_no_cuda(op, first);
}

// a [..., c] and a vector v [c].
int64_t check_channel(const char* op, const Tensor& x, const char* vname, const Tensor& v) {
  check_float_args(op, {{"x", &x}, {vname, &v}});
  AMOR_CHECK(x.dim() >= 1, "{}: argument 'x' is {}, expected at least 1 dimension", op, x.str());
  check_shape(op, vname, v, {x.size(-1)});
  if (!x.is_cpu()) fail_no_cuda(op, x);
  return x.size(-1);
}

template <class F>
Tensor map1(const char* op, const Tensor& a, F f) {
  check_same(op, {{"a", &a}});
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_float(op, a, [&](auto tag) {
    using T = decltype(tag);
    const T* p = a.data<T>();
    T* q = y.data<T>();
    for (int64_t i = 0; i < a.numel(); ++i) q[i] = static_cast<T>(f(p[i]));
  });
  return y;
}

template <class F>
Tensor map2(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_same(op, {{"a", &a}, {"b", &b}});
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_float(op, a, [&](auto tag) {
    using T = decltype(tag);
    const T* p = a.data<T>();
    const T* r = b.data<T>();
    T* q = y.data<T>();
    for (int64_t i = 0; i < a.numel(); ++i) q[i] = static_cast<T>(f(p[i], r[i]));
  });
  return y;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return map2("add", a, b, [](auto x, auto y) { return x + y; });
}

void add_(Tensor& a, const Tensor& b, double alpha) {
  check_same("add_", {{"a", &a}, {"b", &b}});
  dispatch_float("add_", a, [&](auto tag) {
    using T = decltype(tag);
    T* p = a.data<T>();
    const T* q = b.data<T>();
    T s = static_cast<T>(alpha);
    for (int64_t i = 0; i < a.numel(); ++i) p[i] += s * q[i];
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return map2("mul", a, b, [](auto x, auto y) { return x * y; });
}

Tensor scale(const Tensor& a, double s) {
  return map1("scale", a, [s](auto x) { return x * static_cast<decltype(x)>(s); });
}

Tensor sigmoid_forward(const Tensor& x) {
  return map1("sigmoid_forward", x, [](auto v) { return ref::sigmoid_of(v); });
}

Tensor sigmoid_backward(const Tensor& y, const Tensor& dy) {
  return map2("sigmoid_backward", y, dy, [](auto s, auto g) { return g * s * (1 - s); });
}

Tensor silu_forward(const Tensor& x) {
  return map1("silu_forward", x, [](auto v) { return v * ref::sigmoid_of(v); });
}

Tensor silu_backward(const Tensor& x, const Tensor& dy) {
  return map2("silu_backward", x, dy, [](auto v, auto g) {
    auto s = ref::sigmoid_of(v);
    return g * s * (1 + v * (1 - s));
  });
}

Tensor bias_softplus_forward(const Tensor& x, const Tensor& bias) {
  const char* op = "bias_softplus_forward";
  int64_t c = check_channel(op, x, "bias", bias);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::bias_softplus_forward(x.data<T>(), bias.data<T>(), y.data<T>(), x.numel() / c, c);
  });
  return y;
}

BiasSoftplusGrads bias_softplus_backward(const Tensor& x, const Tensor& bias, const Tensor& dy) {
  const char* op = "bias_softplus_backward";
  int64_t c = check_channel(op, x, "bias", bias);
  check_shape(op, "dy", dy, x.shape());
  BiasSoftplusGrads g{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(bias.shape(), x.dtype())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::bias_softplus_backward(x.data<T>(), bias.data<T>(), dy.data<T>(), g.dx.data<T>(),
                                g.dbias.data<T>(), x.numel() / c, c);
  });
  return g;
}

Tensor channel_scale_forward(const Tensor& x, const Tensor& s) {
  const char* op = "channel_scale_forward";
  int64_t c = check_channel(op, x, "s", s);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::channel_scale_forward(x.data<T>(), s.data<T>(), y.data<T>(), x.numel() / c, c);
  });
  return y;
}

ChannelScaleGrads channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy) {
  const char* op = "channel_scale_backward";
  int64_t c = check_channel(op, x, "s", s);
  check_shape(op, "dy", dy, x.shape());
  ChannelScaleGrads g{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(s.shape(), x.dtype())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::channel_scale_backward(x.data<T>(), s.data<T>(), dy.data<T>(), g.dx.data<T>(),
                                g.ds.data<T>(), x.numel() / c, c);
  });
  return g;
}

}  // namespace amor
