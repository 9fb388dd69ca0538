// Causal GQA attention's entry points: argument checks, then the cpu reference or a CUDA path.
//
// On cuda two implementations exist. Dense bf16 attention with head dim 64 or 128 (no gate) runs
// on cuDNN's fused flash attention (attention_cudnn.h: Hopper wgmma/TMA kernels, ~2x ours) when
// cuDNN is in the build and builds a plan for the shape; everything else (the gate, f32, other
// head dims, shapes cuDNN declines) runs on our kernels (attention_cuda.h), which are also the
// fallback. Forward and backward choose independently: both produce and consume the same lse.
//
// AMOR_ATTENTION (environment, read at every call) picks one:
//   auto  (default, or unset) cuDNN where it applies and Tq == Tk is a multiple of 128 (the
//         training and full-sequence shapes), else ours. cuDNN builds a plan per shape (once,
//         then cached): decode (Tq = 1, Tk growing by one per token) and arbitrary prompt lengths
//         would build one per call, so they stay on our kernels. The first call of each shape
//         and pass runs both implementations and compares them (o, lse; dq, dk, dv): cuDNN
//         serves the shape from then on only if they agree (else a line on stderr, and ours).
//   ours  always our kernels
//   cudnn cuDNN for every shape it takes: an amor::Error naming the shape where it does not
//         apply (gate, f32, head dim) or cuDNN cannot build a plan
// When auto falls back for a shape cuDNN declines, cuDNN's reason is printed once to stderr.
// AMOR_ATTENTION_GATED=balanced|fused|fused64|old picks the layout of our kernels for gated rows
// (attention_cuda.cu): default balanced (deterministic; verified on the realistic GPU cases in
// session 7), fused and fused64 (a backward that adds dq by f32 atomics: not bitwise
// deterministic), old (the earlier layout), the last three for comparison.
#include "kernels/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/attention/attention_ref.h"
#include "kernels/cast/cast.h"
#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/core/env_switch.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/attention/attention_cuda.h"
#include "kernels/attention/attention_cudnn.h"
#endif

namespace amor {

#ifdef AMOR_HAVE_CUDA
namespace cuda {
[[noreturn]] void cudnn_attention_fail(const std::string& what) { throw Error(what); }
}  // namespace cuda
#endif

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

#ifdef AMOR_HAVE_CUDA
enum class AttentionImpl { Auto, Ours, Cudnn };

// Read at every call (bench-attention and the cuDNN parity test switch it between calls).
AttentionImpl attention_impl() {
  const std::string e = env_choice("AMOR_ATTENTION", {"auto", "ours", "cudnn"}, "auto");
  return e == "ours" ? AttentionImpl::Ours : e == "cudnn" ? AttentionImpl::Cudnn : AttentionImpl::Auto;
}

// Auto mode's verdict per (shape, scale, pass): unknown until the first call compares cuDNN with
// our kernels (see the top of the file).
enum class Verdict { Unknown, Agrees, Disagrees };
using VerdictKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, bool>;
std::mutex verdict_mu;
std::map<VerdictKey, Verdict>& verdicts() {
  static auto* m = new std::map<VerdictKey, Verdict>();
  return *m;
}
VerdictKey verdict_key(const ref::AttentionDims& n, double scale, bool backward) {
  return {n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D, scale, backward};
}
Verdict verdict(const ref::AttentionDims& n, double scale, bool backward) {
  std::lock_guard<std::mutex> lock(verdict_mu);
  auto it = verdicts().find(verdict_key(n, scale, backward));
  return it == verdicts().end() ? Verdict::Unknown : it->second;
}
void set_verdict(const ref::AttentionDims& n, double scale, bool backward, Verdict v) {
  std::lock_guard<std::mutex> lock(verdict_mu);
  verdicts()[verdict_key(n, scale, backward)] = v;
}

enum class CudnnUse { No, Yes, FirstCall };  // FirstCall: run both and compare

// Whether this call runs on cuDNN (see the top of the file). Outputs come from the caching
// allocator (aligned); the inputs must be 16-byte aligned.
CudnnUse cudnn_use(const char* op, const Tensor& q, const Tensor& k, const Tensor& gate,
                   const ref::AttentionDims& n, double scale, bool backward,
                   std::initializer_list<const Tensor*> inputs) {
  const AttentionImpl impl = attention_impl();
  if (impl == AttentionImpl::Ours) return CudnnUse::No;
  bool aligned = true;
  for (const Tensor* t : inputs)
    aligned = aligned && reinterpret_cast<uintptr_t>(t->raw_data()) % 16 == 0;
  const bool eligible = !gate.defined() && q.dtype() == DType::BF16 && (n.D == 64 || n.D == 128) &&
                        aligned && cuda::cudnn_attention_built();
  const cuda::CudnnAttnShape cn{n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D};
  const float fs = static_cast<float>(scale);
  if (impl == AttentionImpl::Auto) {
    if (!eligible || n.Tq != n.Tk || n.Tk % 128 != 0) return CudnnUse::No;
    const Verdict v = verdict(n, scale, backward);
    if (v == Verdict::Disagrees || !cuda::cudnn_attention_supported(cn, fs, backward))
      return CudnnUse::No;
    return v == Verdict::Agrees ? CudnnUse::Yes : CudnnUse::FirstCall;
  }
  AMOR_CHECK(cuda::cudnn_attention_built(),
             "{}: AMOR_ATTENTION=cudnn but this build has no cuDNN (q is {})", op, q.str());
  AMOR_CHECK(eligible,
             "{}: AMOR_ATTENTION=cudnn but cuDNN's path takes only dense (ungated) bf16 attention "
             "with head dim 64 or 128 and 16-byte aligned tensors (q is {}, k is {}, gate {})",
             op, q.str(), k.str(), gate.defined() ? gate.str() : std::string("none"));
  AMOR_CHECK(cuda::cudnn_attention_supported(cn, fs, backward),
             "{}: AMOR_ATTENTION=cudnn but cuDNN cannot run this shape (q is {}, k is {}): {}", op,
             q.str(), k.str(), cuda::cudnn_attention_unsupported_reason(cn, fs, backward));
  return CudnnUse::Yes;
}

// Scratch for a cuDNN call, from the caching allocator.
Tensor cudnn_workspace(const Tensor& q, const ref::AttentionDims& n, double scale, bool backward) {
  const size_t bytes = cuda::cudnn_attention_workspace_bytes(
      {n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D}, static_cast<float>(scale), backward);
  return Tensor::empty({static_cast<int64_t>(std::max<size_t>(bytes, 256))}, DType::U8,
                       q.device());
}

AttentionOutput ours_forward_cuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, double s, const ref::AttentionDims& n) {
  AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                      Tensor::empty({n.B, n.H, n.Tq}, DType::F32, q.device())};
  const cuda::AttnDims cn{n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D};
  Tensor rows = Tensor::empty({cuda::attention_row_scratch_ints(cn)}, DType::I32, q.device());
  // The split-KV decode path's partial outputs (attention_cuda.h), where it may run.
  const int64_t fwd_floats = cuda::attention_forward_scratch_floats(q.dtype(), cn);
  Tensor fwd = fwd_floats > 0 ? Tensor::empty({fwd_floats}, DType::F32, q.device()) : Tensor();
  cuda::attention_forward(q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(), gate_ptr(gate),
                          static_cast<float>(s), out.o.raw_data(), out.lse.data<float>(),
                          rows.data<int32_t>(), fwd_floats > 0 ? fwd.data<float>() : nullptr, cn);
  return out;
}

AttentionOutput cudnn_forward_cuda(const Tensor& q, const Tensor& k, const Tensor& v, double s,
                                   const ref::AttentionDims& n) {
  AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                      Tensor::empty({n.B, n.H, n.Tq}, DType::F32, q.device())};
  Tensor ws = cudnn_workspace(q, n, s, false);
  cuda::cudnn_attention_forward(q.raw_data(), k.raw_data(), v.raw_data(), static_cast<float>(s),
                                out.o.raw_data(), out.lse.data<float>(), ws.raw_data(),
                                {n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D});
  return out;
}

AttentionGrads ours_backward_cuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, const Tensor& o, const Tensor& lse,
                                  const Tensor& dout, double s, const ref::AttentionDims& n) {
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()),
                   Tensor::empty(k.shape(), q.dtype(), q.device()),
                   Tensor::empty(v.shape(), q.dtype(), q.device())};
  const cuda::AttnDims cn{n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D};
  Tensor rows = Tensor::empty({cuda::attention_row_scratch_ints(cn)}, DType::I32, q.device());
  Tensor delta =
      Tensor::empty({cuda::attention_delta_scratch_floats(cn, gate.defined())}, DType::F32,
                    q.device());
  cuda::attention_backward(q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(), gate_ptr(gate),
                           o.raw_data(), lse.data<float>(), dout.raw_data(),
                           static_cast<float>(s), g.dq.raw_data(), g.dk.raw_data(),
                           g.dv.raw_data(), rows.data<int32_t>(), delta.data<float>(), cn);
  return g;
}

AttentionGrads cudnn_backward_cuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& o, const Tensor& lse, const Tensor& dout,
                                   double s, const ref::AttentionDims& n) {
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()),
                   Tensor::empty(k.shape(), q.dtype(), q.device()),
                   Tensor::empty(v.shape(), q.dtype(), q.device())};
  Tensor ws = cudnn_workspace(q, n, s, true);
  cuda::cudnn_attention_backward(q.raw_data(), k.raw_data(), v.raw_data(), o.raw_data(),
                                 lse.data<float>(), dout.raw_data(), static_cast<float>(s),
                                 g.dq.raw_data(), g.dk.raw_data(), g.dv.raw_data(),
                                 ws.raw_data(), {n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D});
  return g;
}

// rms(a - b) / rms(b) of two cuda tensors of one shape (f32 or bf16), on the host; NaN if either
// holds a NaN. Only auto mode's first call of a shape pays for it.
double rel_rms(const Tensor& a, const Tensor& b) {
  const Tensor x = cast(a, DType::F32).to(Device::CPU), y = cast(b, DType::F32).to(Device::CPU);
  const float* px = x.data<float>();
  const float* py = y.data<float>();
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double d = double(px[i]) - double(py[i]);
    num += d * d;
    den += double(py[i]) * double(py[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Auto mode's agreement limits: each implementation is within 5e-3 (o) and 1e-2 (gradients) of
// the exact result (tests/cuda), so a correct pair is within twice that; a wrong graph (mask,
// layout) is off by O(1). lse is f32 on both sides.
constexpr double kAgreeO = 1e-2, kAgreeLse = 1e-4, kAgreeGrad = 2e-2;

AttentionOutput forward_cuda(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& gate, double s, const ref::AttentionDims& n) {
  switch (cudnn_use(op, q, k, gate, n, s, false, {&q, &k, &v})) {
    case CudnnUse::No:
      return ours_forward_cuda(q, k, v, gate, s, n);
    case CudnnUse::Yes:
      return cudnn_forward_cuda(q, k, v, s, n);
    case CudnnUse::FirstCall:
      break;
  }
  AttentionOutput c = cudnn_forward_cuda(q, k, v, s, n);
  AttentionOutput r = ours_forward_cuda(q, k, v, gate, s, n);
  const double eo = rel_rms(c.o, r.o), el = rel_rms(c.lse, r.lse);
  const bool agree = eo <= kAgreeO && el <= kAgreeLse;
  set_verdict(n, s, false, agree ? Verdict::Agrees : Verdict::Disagrees);
  if (agree) return c;
  std::fprintf(stderr,
               "amor: %s: cuDNN's attention disagrees with ours at q %s (o rel rms %.3g, limit "
               "%.0e; lse %.3g, limit %.0e): our kernels serve this shape\n",
               op, q.str().c_str(), eo, kAgreeO, el, kAgreeLse);
  return r;
}

AttentionGrads backward_cuda(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& gate, const Tensor& o, const Tensor& lse,
                             const Tensor& dout, double s, const ref::AttentionDims& n) {
  switch (cudnn_use(op, q, k, gate, n, s, true, {&q, &k, &v, &o, &lse, &dout})) {
    case CudnnUse::No:
      return ours_backward_cuda(q, k, v, gate, o, lse, dout, s, n);
    case CudnnUse::Yes:
      return cudnn_backward_cuda(q, k, v, o, lse, dout, s, n);
    case CudnnUse::FirstCall:
      break;
  }
  AttentionGrads c = cudnn_backward_cuda(q, k, v, o, lse, dout, s, n);
  AttentionGrads r = ours_backward_cuda(q, k, v, gate, o, lse, dout, s, n);
  const double eq = rel_rms(c.dq, r.dq), ek = rel_rms(c.dk, r.dk), ev = rel_rms(c.dv, r.dv);
  const bool agree = eq <= kAgreeGrad && ek <= kAgreeGrad && ev <= kAgreeGrad;
  set_verdict(n, s, true, agree ? Verdict::Agrees : Verdict::Disagrees);
  if (agree) return c;
  std::fprintf(stderr,
               "amor: %s: cuDNN's attention disagrees with ours at q %s (rel rms dq %.3g, dk "
               "%.3g, dv %.3g, limit %.0e): our kernels serve this shape\n",
               op, q.str().c_str(), eq, ek, ev, kAgreeGrad);
  return r;
}
#endif

}  // namespace

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& gate, std::optional<double> scale) {
  const char* op = "attention_forward";
  double s = 0;
  ref::AttentionDims n = check_attention_args(op, q, k, v, gate, scale, &s);
  if (!q.is_cpu()) {
    check_attention_cuda(op, q, k, n);
    AMOR_ON_CUDA(op, q, return forward_cuda(op, q, k, v, gate, s, n));
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

AttentionOutput attention_forward_cache(const Tensor& q, const Tensor& k_cache,
                                        const Tensor& v_cache, const Tensor& lengths,
                                        const Tensor& gate, std::optional<double> scale) {
  const char* op = "attention_forward_cache";
  double s = 0;
  // The storage as the keys (Tk = C): the same checks of shapes, dtypes, heads and gate.
  ref::AttentionDims n = check_attention_args(op, q, k_cache, v_cache, gate, scale, &s);
  check_dtype(op, "lengths", lengths, DType::I32);
  check_shape(op, "lengths", lengths, {n.B});
  AMOR_CHECK(lengths.device() == q.device(),
             "{}: lengths {} must be on the device of q {} (they are read there)", op,
             lengths.str(), q.str());
  if (!q.is_cpu()) {
    check_attention_cuda(op, q, k_cache, n);
    AMOR_ON_CUDA(op, q, {
      AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                          Tensor::empty({n.B, n.H, n.Tq}, DType::F32, q.device())};
      const cuda::AttnDims cn{n.B, n.Tq, n.Tk, n.H, n.Hkv, n.D};
      const int64_t floats = cuda::attention_cache_scratch_floats(q.dtype(), cn);
      Tensor scratch = floats > 0 ? Tensor::empty({floats}, DType::F32, q.device()) : Tensor();
      cuda::attention_forward_cache(q.dtype(), q.raw_data(), k_cache.raw_data(),
                                    v_cache.raw_data(), lengths.data<int32_t>(), gate_ptr(gate),
                                    static_cast<float>(s), out.o.raw_data(),
                                    out.lse.data<float>(),
                                    floats > 0 ? scratch.data<float>() : nullptr, cn);
      return out;
    });
  }
  // The reference: attention_forward per sequence on the views of its rows.
  const int32_t* len = lengths.data<int32_t>();
  for (int64_t b = 0; b < n.B; ++b)
    AMOR_CHECK(len[b] >= n.Tq && len[b] <= n.Tk,
               "{}: sequence {} holds {} keys; it needs {} <= keys <= the storage's {} rows (q is "
               "{})",
               op, b, len[b], n.Tq, n.Tk, q.str());
  AttentionOutput out{Tensor::empty(q.shape(), q.dtype(), q.device()),
                      Tensor::empty({n.B, n.H, n.Tq}, q.dtype(), q.device())};
  const int64_t qn = n.Tq * n.H * n.D, kn = n.Tk * n.Hkv * n.D, ln = n.H * n.Tq;
  for (int64_t b = 0; b < n.B; ++b) {
    const Shape ks{1, len[b], n.Hkv, n.D};
    AttentionOutput r = attention_forward(
        q.slice_flat(b * qn, {1, n.Tq, n.H, n.D}), k_cache.slice_flat(b * kn, ks),
        v_cache.slice_flat(b * kn, ks), gate.defined() ? gate.slice_flat(b * n.Tq, {1, n.Tq}) : Tensor(),
        s);
    out.o.slice_flat(b * qn, {1, n.Tq, n.H, n.D}).copy_from(r.o);
    out.lse.slice_flat(b * ln, {1, n.H, n.Tq}).copy_from(r.lse);
  }
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
    AMOR_ON_CUDA(op, q, return backward_cuda(op, q, k, v, gate, o, lse, dout, s, n));
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
