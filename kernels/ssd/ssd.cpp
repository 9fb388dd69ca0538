#include "kernels/ssd/ssd.h"

#include "kernels/core/check.h"
#include "kernels/ssd/ssd_chunked_ref.h"
#include "kernels/ssd/ssd_recurrent_ref.h"

namespace amor {
namespace {

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Checks the scan's inputs and returns its sizes. B and C are [batch, seqlen, G, N] with G
// dividing H.
ref::SsdLayout check_scan_args(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A,
                               const Tensor& B, const Tensor& C, const Tensor& D,
                               const Tensor& initial_state, int64_t chunk_size) {
  check_float_args(op, {{"x", &x}, {"dt", &dt}, {"A", &A}, {"B", &B}, {"C", &C}, {"D", &D}});
  if (initial_state.defined()) check_float_args(op, {{"x", &x}, {"initial_state", &initial_state}});
  check_dim(op, "x", x, 4);
  const int64_t batch = x.size(0), seqlen = x.size(1), heads = x.size(2), headdim = x.size(3);
  check_shape(op, "dt", dt, {batch, seqlen, heads});
  check_shape(op, "A", A, {heads});
  check_shape(op, "D", D, {heads});
  check_shape(op, "B", B, {batch, seqlen, kAny, kAny});
  const int64_t groups = B.size(2), dstate = B.size(3);
  check_shape(op, "C", C, {batch, seqlen, groups, dstate});
  AMOR_CHECK(groups > 0 && heads % groups == 0,
             "{}: {} heads (x is {}) cannot be split into {} groups (B is {})", op, heads, x.str(),
             groups, B.str());
  if (initial_state.defined())
    check_shape(op, "initial_state", initial_state, {batch, heads, headdim, dstate});
  AMOR_CHECK(chunk_size >= 0, "{}: chunk_size is {}, expected >= 0 (0 = step-by-step recurrence)",
             op, chunk_size);
  return {batch, seqlen, heads, headdim, groups, dstate};
}

}  // namespace

SsdOut ssd_forward(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                   const Tensor& C, const Tensor& D, const Tensor& initial_state,
                   int64_t chunk_size) {
  const char* op = "ssd_forward";
  ref::SsdLayout L = check_scan_args(op, x, dt, A, B, C, D, initial_state, chunk_size);
  if (!x.is_cpu()) fail_no_cuda(op, x);
  SsdOut out{Tensor::empty(x.shape(), x.dtype()),
             Tensor::empty({L.batch, L.heads, L.headdim, L.dstate}, x.dtype())};
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    if (chunk_size == 0)
      ref::ssd_recurrent_forward(L, x.data<T>(), dt.data<T>(), A.data<T>(), B.data<T>(),
                                 C.data<T>(), D.data<T>(), data_or_null<T>(initial_state),
                                 out.y.data<T>(), out.final_state.data<T>());
    else
      ref::ssd_chunked_forward(L, chunk_size, x.data<T>(), dt.data<T>(), A.data<T>(), B.data<T>(),
                               C.data<T>(), D.data<T>(), data_or_null<T>(initial_state),
                               out.y.data<T>(), out.final_state.data<T>());
  });
  return out;
}

SsdGrads ssd_backward(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                      const Tensor& C, const Tensor& D, const Tensor& initial_state,
                      const Tensor& dy, const Tensor& d_final_state, int64_t chunk_size) {
  const char* op = "ssd_backward";
  ref::SsdLayout L = check_scan_args(op, x, dt, A, B, C, D, initial_state, chunk_size);
  check_float_args(op, {{"x", &x}, {"dy", &dy}});
  check_shape(op, "dy", dy, x.shape());
  if (d_final_state.defined()) {
    check_float_args(op, {{"x", &x}, {"d_final_state", &d_final_state}});
    check_shape(op, "d_final_state", d_final_state, {L.batch, L.heads, L.headdim, L.dstate});
  }
  if (!x.is_cpu()) fail_no_cuda(op, x);
  SsdGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype());
  g.ddt = Tensor::empty(dt.shape(), x.dtype());
  g.dA = Tensor::empty(A.shape(), x.dtype());
  g.dB = Tensor::empty(B.shape(), x.dtype());
  g.dC = Tensor::empty(C.shape(), x.dtype());
  g.dD = Tensor::empty(D.shape(), x.dtype());
  if (initial_state.defined()) g.dinitial_state = Tensor::empty(initial_state.shape(), x.dtype());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    const T* h0 = data_or_null<T>(initial_state);
    const T* dhT = data_or_null<T>(d_final_state);
    T* dh0 = g.dinitial_state.defined() ? g.dinitial_state.data<T>() : nullptr;
    if (chunk_size == 0)
      ref::ssd_recurrent_backward(L, x.data<T>(), dt.data<T>(), A.data<T>(), B.data<T>(),
                                  C.data<T>(), D.data<T>(), h0, dy.data<T>(), dhT, g.dx.data<T>(),
                                  g.ddt.data<T>(), g.dA.data<T>(), g.dB.data<T>(), g.dC.data<T>(),
                                  g.dD.data<T>(), dh0);
    else
      ref::ssd_chunked_backward(L, chunk_size, x.data<T>(), dt.data<T>(), A.data<T>(),
                                B.data<T>(), C.data<T>(), D.data<T>(), h0, dy.data<T>(), dhT,
                                g.dx.data<T>(), g.ddt.data<T>(), g.dA.data<T>(), g.dB.data<T>(),
                                g.dC.data<T>(), g.dD.data<T>(), dh0);
  });
  return g;
}

Tensor ssd_step(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                const Tensor& C, const Tensor& D, const Tensor& state) {
  const char* op = "ssd_step";
  check_float_args(op, {{"x", &x}, {"dt", &dt}, {"A", &A}, {"B", &B}, {"C", &C}, {"D", &D},
                        {"state", &state}});
  check_dim(op, "x", x, 3);
  const int64_t batch = x.size(0), heads = x.size(1), headdim = x.size(2);
  check_shape(op, "dt", dt, {batch, heads});
  check_shape(op, "A", A, {heads});
  check_shape(op, "D", D, {heads});
  check_shape(op, "B", B, {batch, kAny, kAny});
  const int64_t groups = B.size(1), dstate = B.size(2);
  check_shape(op, "C", C, {batch, groups, dstate});
  AMOR_CHECK(groups > 0 && heads % groups == 0,
             "{}: {} heads (x is {}) cannot be split into {} groups (B is {})", op, heads, x.str(),
             groups, B.str());
  check_shape(op, "state", state, {batch, heads, headdim, dstate});
  if (!x.is_cpu()) fail_no_cuda(op, x);
  ref::SsdLayout L{batch, 1, heads, headdim, groups, dstate};
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::ssd_step(L, x.data<T>(), dt.data<T>(), A.data<T>(), B.data<T>(), C.data<T>(),
                  D.data<T>(), state.data<T>(), y.data<T>());
  });
  return y;
}

}  // namespace amor
