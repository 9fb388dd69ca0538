#include "kernels/attention/attention.h"

#include <cmath>

#include "kernels/attention/attention_ref.h"
#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/attention/attention_cuda.h"
#endif

namespace amor {

namespace {

// Checks q, k, v, the optional gate and the scale; returns the dimensions and the scale to use.
ref::AttentionDims check_attention_args(const char* op, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& gate,
                                        std::optional<double> scale, double* scale_out) {
  check_dim(op, "q", q, 4);
  check_dim(op, "k", k, 4);
  check_float_args(op, {{"q", &q}, {"k", &k}, {"v", &v}});
  ref::AttentionDims n{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  check_shape(op, "k", k, {n.B, kAny, kAny, n.D});
  check_shape(op, "v", v, k.shape());
  AMOR_CHECK(n.Hkv >= 1 && n.H % n.Hkv == 0,
             "{}: q has {} heads and k has {}: the query heads must be a multiple of the kv heads "
             "(q is {}, k is {})",
             op, n.H, n.Hkv, q.str(), k.str());
  AMOR_CHECK(n.Tq <= n.Tk,
             "{}: q has {} positions but k has only {}: the queries must be the last Tq <= Tk "
             "positions (q is {}, k is {})",
             op, n.Tq, n.Tk, q.str(), k.str());
  if (gate.defined()) {
    check_dtype(op, "gate", gate, DType::U8);
    check_shape(op, "gate", gate, {n.B, n.Tq});
    AMOR_CHECK(gate.device() == q.device(),
               "{}: arguments 'q' ({}) and 'gate' ({}) are on different devices", op, q.str(),
               gate.str());
  }
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(n.D));
  AMOR_CHECK(std::isfinite(s), "{}: scale is {}, expected a finite number (q is {})", op, s,
             q.str());
  *scale_out = s;
  return n;
}

const uint8_t* gate_ptr(const Tensor& gate) {
  return gate.defined() ? gate.data<uint8_t>() : nullptr;
}

// The cuda kernels' limits: f32 or bf16 storage, head dim up to 256 (the SIMT path keeps a row in
// shared memory), sequence lengths and head counts within int and the grid's y/z limits.
void check_attention_cuda(const char* op, const Tensor& q, const Tensor& k,
                          const ref::AttentionDims& n) {
  check_cuda_storage(op, "q", q);
  AMOR_CHECK(n.D <= 256, "{}: head dim {} is above the cuda kernels' limit of 256 (q is {})", op,
             n.D, q.str());
  AMOR_CHECK(n.H <= 65535 && n.B <= 65535,
             "{}: {} heads and batch {} exceed the cuda grid limit of 65535 (q is {})", op, n.H,
             n.B, q.str());
  check_cuda_int_range(op, "the key count Tk", n.Tk);
  check_cuda_int_range(op, "B * Tq", n.B * n.Tq);
  (void)k;
}

}  // namespace

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, std::optional<double> scale) {
  const char* op = "attention_forward";
  double s = 0;
  ref::AttentionDims n = check_attention_args(op, q, k, v, gate, scale, &s);
  if (!q.is_cpu()) {
    check_attention_cuda(op, q, k, n);
    AMOR_ON_CUDA(
        op, q, AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                                   Tensor::empty({n.B, n.H, n.Tq}, DType::F32, q.device())};
        Tensor rows = Tensor::empty({cuda::attention_row_scratch_ints({n.B, n.Tq, n.Tk, n.H,
                                                                       n.Hkv, n.D})},
                                    DType::I32, q.device());
        cuda::attention_forward(q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(),
                                gate_ptr(gate), static_cast<float>(s), out.o.raw_data(),
                                out.lse.data<float>(), rows.data<int32_t>(),
                                {n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D});
        return out);
  }
  AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                      Tensor::empty({n.B, n.H, n.Tq}, q.dtype(), q.device())};
  dispatch_float(op, q, [&](auto tag) {
    using T = decltype(tag);
    ref::attention_forward(q.data<T>(), k.data<T>(), v.data<T>(), gate_ptr(gate),
                           static_cast<T>(s), out.o.data<T>(), out.lse.data<T>(), n);
  });
  return out;
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, const Tensor& o, const Tensor& lse,
                                  const Tensor& dout, std::optional<double> scale) {
  const char* op = "attention_backward";
  double s = 0;
  ref::AttentionDims n = check_attention_args(op, q, k, v, gate, scale, &s);
  if (!q.is_cpu()) {  // lse is the forward's f32 statistic on cuda, whatever q's dtype
    check_float_args(op, {{"q", &q}, {"o", &o}, {"dout", &dout}});
    check_on_cuda(op, "lse", lse);
    check_cuda_dtype(op, "lse", lse, DType::F32, "the forward's f32 statistics");
  } else {
    check_float_args(op, {{"q", &q}, {"o", &o}, {"lse", &lse}, {"dout", &dout}});
  }
  check_shape(op, "o", o, q.shape());
  check_shape(op, "lse", lse, {n.B, n.H, n.Tq});
  check_shape(op, "dout", dout, q.shape());
  if (!q.is_cpu()) {
    check_attention_cuda(op, q, k, n);
    AMOR_ON_CUDA(
        op, q, AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()),
                                Tensor::empty(k.shape(), q.dtype(), q.device()),
                                Tensor::empty(v.shape(), q.dtype(), q.device())};
        const cuda::AttnDims cn{n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D};
        Tensor rows = Tensor::empty({cuda::attention_row_scratch_ints(cn)}, DType::I32,
                                    q.device());
        Tensor delta = Tensor::empty({n.B * n.H * n.Tq}, DType::F32, q.device());
        cuda::attention_backward(q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(),
                                 gate_ptr(gate), o.raw_data(), lse.data<float>(),
                                 dout.raw_data(), static_cast<float>(s), g.dq.raw_data(),
                                 g.dk.raw_data(), g.dv.raw_data(), rows.data<int32_t>(),
                                 delta.data<float>(), cn);
        return g);
  }
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()),
                   Tensor::empty(k.shape(), q.dtype(), q.device()),
                   Tensor::empty(v.shape(), q.dtype(), q.device())};
  dispatch_float(op, q, [&](auto tag) {
    using T = decltype(tag);
    ref::attention_backward(q.data<T>(), k.data<T>(), v.data<T>(), gate_ptr(gate),
                            static_cast<T>(s), o.data<T>(), lse.data<T>(), dout.data<T>(),
                            g.dq.data<T>(), g.dk.data<T>(), g.dv.data<T>(), n);
  });
  return g;
}

}  // namespace amor
