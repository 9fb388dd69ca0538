#include "kernels/elementwise/elementwise.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/elementwise/elementwise_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/elementwise/elementwise_cuda.h"
#endif

namespace amor {

namespace {

// Checks that all tensors are float, on one device, of one dtype and of the first one's shape; on
// cuda also that the dtype is one the kernels store (f32 or bf16).
void check_same(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> args) {
  check_float_args(op, args);
  const Tensor& first = *args.begin()->second;
  for (auto& [name, t] : args) check_shape(op, name, *t, first.shape());
  if (!first.is_cpu()) check_cuda_storage(op, args.begin()->first, first);
}

// a [..., c] and a vector v [c].
int64_t check_channel(const char* op, const Tensor& x, const char* vname, const Tensor& v) {
  check_float_args(op, {{"x", &x}, {vname, &v}});
  AMOR_CHECK(x.dim() >= 1, "{}: argument 'x' is {}, expected at least 1 dimension", op, x.str());
  check_shape(op, vname, v, {x.size(-1)});
  if (!x.is_cpu()) check_cuda_storage(op, "x", x);
  return x.size(-1);
}

template <class F>
Tensor map1(const char* op, const Tensor& a, F f) {
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

#ifdef AMOR_HAVE_CUDA
// ---- cuda paths (arguments already checked)
using Launch1 = void (*)(DType, const void*, void*, int64_t, cudaStream_t);
using Launch2 = void (*)(DType, const void*, const void*, void*, int64_t, cudaStream_t);

Tensor map1_cuda(const Tensor& a, Launch1 launch) {
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  launch(a.dtype(), a.raw_data(), y.raw_data(), a.numel(), 0);
  return y;
}

Tensor map2_cuda(const Tensor& a, const Tensor& b, Launch2 launch) {
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  launch(a.dtype(), a.raw_data(), b.raw_data(), y.raw_data(), a.numel(), 0);
  return y;
}

Tensor scale_cuda(const Tensor& a, double s) {
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  cuda::scale(a.dtype(), a.raw_data(), s, y.raw_data(), a.numel());
  return y;
}

Tensor channel_forward_cuda(const Tensor& x, const Tensor& v, bool softplus) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t c = x.size(-1), rows = x.numel() / c;
  if (softplus) {
    cuda::bias_softplus_forward(x.dtype(), x.raw_data(), v.raw_data(), y.raw_data(), rows, c);
  } else {
    cuda::channel_scale_forward(x.dtype(), x.raw_data(), v.raw_data(), y.raw_data(), rows, c);
  }
  return y;
}

// dx in x's dtype; the per-channel gradient dv in f32.
std::pair<Tensor, Tensor> channel_backward_cuda(const Tensor& x, const Tensor& v, const Tensor& dy,
                                                bool softplus) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor dv = Tensor::empty(v.shape(), DType::F32, x.device());
  Tensor scratch =
      Tensor::empty({cuda::channel_grad_scratch_floats(rows, c)}, DType::F32, x.device());
  auto launch = softplus ? cuda::bias_softplus_backward : cuda::channel_scale_backward;
  launch(x.dtype(), x.raw_data(), v.raw_data(), dy.raw_data(), dx.raw_data(), dv.data<float>(),
         scratch.data<float>(), rows, c, 0);
  return {dx, dv};
}
#endif

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  const char* op = "add";
  check_same(op, {{"a", &a}, {"b", &b}});
  if (!a.is_cpu()) AMOR_ON_CUDA(op, a, return map2_cuda(a, b, cuda::add));
  return map2(op, a, b, [](auto x, auto y) { return x + y; });
}

// On cuda, a may also be f32 with b bf16 (bf16 gradients accumulated into f32).
void add_(Tensor& a, const Tensor& b, double alpha) {
  const char* op = "add_";
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  // A wider accumulator takes a narrower addend: f32 += bf16 on cuda, f64 += f32 on the cpu
  // (parameter gradients kept in the master dtype under mixed precision; the cpu pair lets the
  // sharding code's mixed-precision path run in CI).
  const bool cuda_mixed = !a.is_cpu() && !b.is_cpu() && a.dtype() == DType::F32 && b.dtype() == DType::BF16;
  const bool cpu_mixed = a.is_cpu() && b.is_cpu() && a.dtype() == DType::F64 && b.dtype() == DType::F32;
  if (cuda_mixed || cpu_mixed) {
    check_shape(op, "b", b, a.shape());
  } else {
    check_same(op, {{"a", &a}, {"b", &b}});
  }
  if (cpu_mixed) {
    double* p = a.data<double>();
    const float* q = b.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) p[i] += alpha * static_cast<double>(q[i]);
    return;
  }
  if (!a.is_cpu()) {
    AMOR_ON_CUDA(op, a, cuda::add_inplace(a.dtype(), a.raw_data(), b.dtype(), b.raw_data(), alpha,
                                          a.numel());
                 return);
  }
  dispatch_float(op, a, [&](auto tag) {
    using T = decltype(tag);
    T* p = a.data<T>();
    const T* q = b.data<T>();
    T s = static_cast<T>(alpha);
    for (int64_t i = 0; i < a.numel(); ++i) p[i] += s * q[i];
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const char* op = "mul";
  check_same(op, {{"a", &a}, {"b", &b}});
  if (!a.is_cpu()) AMOR_ON_CUDA(op, a, return map2_cuda(a, b, cuda::mul));
  return map2(op, a, b, [](auto x, auto y) { return x * y; });
}

Tensor scale(const Tensor& a, double s) {
  const char* op = "scale";
  check_same(op, {{"a", &a}});
  if (!a.is_cpu()) AMOR_ON_CUDA(op, a, return scale_cuda(a, s));
  return map1(op, a, [s](auto x) { return x * static_cast<decltype(x)>(s); });
}

Tensor sigmoid_forward(const Tensor& x) {
  const char* op = "sigmoid_forward";
  check_same(op, {{"a", &x}});
  if (!x.is_cpu()) AMOR_ON_CUDA(op, x, return map1_cuda(x, cuda::sigmoid_forward));
  return map1(op, x, [](auto v) { return ref::sigmoid_of(v); });
}

Tensor sigmoid_backward(const Tensor& y, const Tensor& dy) {
  const char* op = "sigmoid_backward";
  check_same(op, {{"a", &y}, {"b", &dy}});
  if (!y.is_cpu()) AMOR_ON_CUDA(op, y, return map2_cuda(y, dy, cuda::sigmoid_backward));
  return map2(op, y, dy, [](auto s, auto g) { return g * s * (1 - s); });
}

Tensor silu_forward(const Tensor& x) {
  const char* op = "silu_forward";
  check_same(op, {{"a", &x}});
  if (!x.is_cpu()) AMOR_ON_CUDA(op, x, return map1_cuda(x, cuda::silu_forward));
  return map1(op, x, [](auto v) { return v * ref::sigmoid_of(v); });
}

Tensor silu_backward(const Tensor& x, const Tensor& dy) {
  const char* op = "silu_backward";
  check_same(op, {{"a", &x}, {"b", &dy}});
  if (!x.is_cpu()) AMOR_ON_CUDA(op, x, return map2_cuda(x, dy, cuda::silu_backward));
  return map2(op, x, dy, [](auto v, auto g) {
    auto s = ref::sigmoid_of(v);
    return g * s * (1 + v * (1 - s));
  });
}

Tensor bias_softplus_forward(const Tensor& x, const Tensor& bias) {
  const char* op = "bias_softplus_forward";
  int64_t c = check_channel(op, x, "bias", bias);
  if (!x.is_cpu()) AMOR_ON_CUDA(op, x, return channel_forward_cuda(x, bias, true));
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
  check_float_args(op, {{"x", &x}, {"dy", &dy}});
  check_shape(op, "dy", dy, x.shape());
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, auto [dx, db] = channel_backward_cuda(x, bias, dy, true);
                 return BiasSoftplusGrads{dx, db});
  }
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
  if (!x.is_cpu()) AMOR_ON_CUDA(op, x, return channel_forward_cuda(x, s, false));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::channel_scale_forward(x.data<T>(), s.data<T>(), y.data<T>(), x.numel() / c, c);
  });
  return y;
}

Tensor channel_scale_add(const Tensor& h, const Tensor& x, const Tensor& s) {
  const char* op = "channel_scale_add";
  const int64_t c = check_channel(op, x, "s", s);
  check_same(op, {{"h", &h}, {"x", &x}});
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
                 cuda::channel_scale_add(x.dtype(), h.raw_data(), x.raw_data(), s.raw_data(),
                                         y.raw_data(), x.numel() / c, c);
                 return y);
  }
  // The cpu: the two ops themselves, so the reference is their bits by construction.
  return add(h, channel_scale_forward(x, s));
}

ChannelScaleGrads channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy) {
  const char* op = "channel_scale_backward";
  int64_t c = check_channel(op, x, "s", s);
  check_float_args(op, {{"x", &x}, {"dy", &dy}});
  check_shape(op, "dy", dy, x.shape());
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, auto [dx, ds] = channel_backward_cuda(x, s, dy, false);
                 return ChannelScaleGrads{dx, ds});
  }
  ChannelScaleGrads g{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(s.shape(), x.dtype())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::channel_scale_backward(x.data<T>(), s.data<T>(), dy.data<T>(), g.dx.data<T>(),
                                g.ds.data<T>(), x.numel() / c, c);
  });
  return g;
}

}  // namespace amor
