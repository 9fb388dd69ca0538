#include "kernels/ssd/ssd.h"

#include <string>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/core/env_switch.h"
#include "kernels/ssd/ssd_chunked_ref.h"
#include "kernels/ssd/ssd_recurrent_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/ssd/ssd_cuda.h"
#endif

namespace amor {
namespace {

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// On cuda (ssd_cuda.h): x, B, C (and dy) share one storage dtype, f32 or bf16; dt, A, D and the
// states are f32 cuda tensors.
void check_cuda_f32(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> args) {
  for (auto& [name, t] : args) {
    check_on_cuda(op, name, *t);
    check_cuda_dtype(op, name, *t, DType::F32, "decays, skip weights and states are f32 on cuda");
  }
}

// Checks the scan's inputs and returns its sizes. B and C are [batch, seqlen, G, N] with G
// dividing H.
ref::SsdLayout check_scan_args(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A,
                               const Tensor& B, const Tensor& C, const Tensor& D,
                               const Tensor& initial_state, int64_t chunk_size) {
  check_defined(op, "x", x);
  if (x.is_cpu()) {
    check_float_args(op, {{"x", &x}, {"dt", &dt}, {"A", &A}, {"B", &B}, {"C", &C}, {"D", &D}});
    if (initial_state.defined())
      check_float_args(op, {{"x", &x}, {"initial_state", &initial_state}});
  } else {
    check_cuda_storage(op, "x", x);
    check_float_args(op, {{"x", &x}, {"B", &B}, {"C", &C}});
    check_cuda_f32(op, {{"dt", &dt}, {"A", &A}, {"D", &D}});
    if (initial_state.defined()) check_cuda_f32(op, {{"initial_state", &initial_state}});
  }
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

#ifdef AMOR_HAVE_CUDA
// What the cuda kernels take: a chunk of 1..kSsdMaxChunk steps whose tiles fit in shared memory,
// and grid sizes within CUDA's limits.
cuda::SsdDims check_cuda_scan(const char* op, const ref::SsdLayout& L, int64_t chunk_size,
                              const Tensor& x) {
  AMOR_CHECK(chunk_size >= 1 && chunk_size <= cuda::kSsdMaxChunk,
             "{}: chunk_size is {}; on cuda it must be 1..{} (0, the step-by-step recurrence, "
             "is the cpu reference's)",
             op, chunk_size, cuda::kSsdMaxChunk);
  cuda::SsdDims d{L.batch, L.seqlen, L.heads, L.headdim, L.groups, L.dstate, chunk_size};
  const int64_t smem = cuda::ssd_smem_bytes(d);
  AMOR_CHECK(smem <= cuda::kSsdMaxSmemBytes,
             "{}: x {} with d_state {} and chunk_size {} needs {} bytes of shared memory per "
             "block on cuda (at most {}): use a smaller chunk",
             op, x.str(), L.dstate, chunk_size, smem, cuda::kSsdMaxSmemBytes);
  AMOR_CHECK(L.batch * L.heads <= 65535 && L.seqlen <= int64_t(0x7fffffff),
             "{}: x {} is too large for the cuda kernels (batch * heads <= 65535)", op, x.str());
  return d;
}
#endif

}  // namespace

SsdOut ssd_forward(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                   const Tensor& C, const Tensor& D, const Tensor& initial_state,
                   int64_t chunk_size, bool keep_for_backward) {
  const char* op = "ssd_forward";
  ref::SsdLayout L = check_scan_args(op, x, dt, A, B, C, D, initial_state, chunk_size);
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, cuda::SsdDims d = check_cuda_scan(op, L, chunk_size, x);
                 SsdOut o{Tensor::empty(x.shape(), x.dtype(), x.device()),
                          Tensor::empty({L.batch, L.heads, L.headdim, L.dstate}, DType::F32,
                                        x.device()),
                          {}};
                 if (keep_for_backward) o.saved = Tensor::empty(
                     {cuda::ssd_saved_floats(x.dtype(), d)}, DType::F32, x.device());
                 Tensor scratch = Tensor::empty(
                     {cuda::ssd_forward_scratch_floats(x.dtype(), d, keep_for_backward)},
                     DType::F32, x.device());
                 cuda::ssd_forward(x.dtype(), d, x.raw_data(), dt.data<float>(),
                                   A.data<float>(), B.raw_data(), C.raw_data(), D.data<float>(),
                                   data_or_null<float>(initial_state), o.y.raw_data(),
                                   o.final_state.data<float>(), scratch.data<float>(), 0,
                                   keep_for_backward ? o.saved.data<float>() : nullptr);
                 return o);
  }
  SsdOut out{Tensor::empty(x.shape(), x.dtype()),
             Tensor::empty({L.batch, L.heads, L.headdim, L.dstate}, x.dtype()),
             {}};
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

bool ssd_keep_for_backward_default() {
  static const bool keep = env_choice("AMOR_SSD_RECOMPUTE", {"0", "1"}, "0") == "0";
  return keep;
}

SsdGrads ssd_backward(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                      const Tensor& C, const Tensor& D, const Tensor& initial_state,
                      const Tensor& dy, const Tensor& d_final_state, int64_t chunk_size,
                      const Tensor& saved) {
  const char* op = "ssd_backward";
  ref::SsdLayout L = check_scan_args(op, x, dt, A, B, C, D, initial_state, chunk_size);
  check_float_args(op, {{"x", &x}, {"dy", &dy}});
  check_shape(op, "dy", dy, x.shape());
  if (d_final_state.defined()) {
    if (x.is_cpu())
      check_float_args(op, {{"x", &x}, {"d_final_state", &d_final_state}});
    else
      check_cuda_f32(op, {{"d_final_state", &d_final_state}});
    check_shape(op, "d_final_state", d_final_state, {L.batch, L.heads, L.headdim, L.dstate});
  }
  if (!x.is_cpu()) {
    // dx, dB, dC in x's dtype; ddt, dA, dD, dinitial_state f32 (ssd.h).
    AMOR_ON_CUDA(
        op, x, cuda::SsdDims d = check_cuda_scan(op, L, chunk_size, x); SsdGrads r;
        const Device dev = x.device(); r.dx = Tensor::empty(x.shape(), x.dtype(), dev);
        r.ddt = Tensor::empty(dt.shape(), DType::F32, dev);
        r.dA = Tensor::empty(A.shape(), DType::F32, dev);
        r.dB = Tensor::empty(B.shape(), x.dtype(), dev);
        r.dC = Tensor::empty(C.shape(), x.dtype(), dev);
        r.dD = Tensor::empty(D.shape(), DType::F32, dev);
        if (initial_state.defined())
            r.dinitial_state = Tensor::empty(initial_state.shape(), DType::F32, dev);
        if (saved.defined()) {
          AMOR_CHECK(saved.dtype() == DType::F32 && saved.device() == dev &&
                         saved.numel() == cuda::ssd_saved_floats(x.dtype(), d),
                     "{}: saved must be the f32 buffer that ssd_forward(keep_for_backward) "
                     "returned for these inputs ({} elements on their device), not {}",
                     op, cuda::ssd_saved_floats(x.dtype(), d), saved.str());
        }
        Tensor scratch = Tensor::empty(
            {cuda::ssd_backward_scratch_floats(x.dtype(), d, saved.defined())}, DType::F32, dev);
        cuda::ssd_backward(x.dtype(), d, x.raw_data(), dt.data<float>(), A.data<float>(),
                           B.raw_data(), C.raw_data(), D.data<float>(),
                           data_or_null<float>(initial_state), dy.raw_data(),
                           data_or_null<float>(d_final_state), r.dx.raw_data(),
                           r.ddt.data<float>(), r.dA.data<float>(), r.dB.raw_data(),
                           r.dC.raw_data(), r.dD.data<float>(),
                           r.dinitial_state.defined() ? r.dinitial_state.data<float>() : nullptr,
                           scratch.data<float>(), 0,
                           saved.defined() ? saved.data<float>() : nullptr);
        return r);
  }
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
  check_defined(op, "x", x);
  if (x.is_cpu()) {
    check_float_args(op, {{"x", &x}, {"dt", &dt}, {"A", &A}, {"B", &B}, {"C", &C}, {"D", &D},
                          {"state", &state}});
  } else {
    check_cuda_storage(op, "x", x);
    check_float_args(op, {{"x", &x}, {"B", &B}, {"C", &C}});
    check_cuda_f32(op, {{"dt", &dt}, {"A", &A}, {"D", &D}, {"state", &state}});
  }
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
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
                 cuda::ssd_step(x.dtype(), batch, heads, headdim, groups, dstate, x.raw_data(),
                                dt.data<float>(), A.data<float>(), B.raw_data(), C.raw_data(),
                                D.data<float>(), state.data<float>(), y.raw_data());
                 return y);
  }
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
