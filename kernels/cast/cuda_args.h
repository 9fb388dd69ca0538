// Host-side argument checks and dispatch for the CUDA paths of the ops (header-only, so every op
// folder can use it even when kernels/cast is left out of an AMOR_OPS build).
//
// On the GPU tensors are stored in f32 or bf16 (design §2: bf16 activations and weights, f32
// statistics, gradients of parameters and optimizer state); each op's header says which of its
// arguments may be which. These checks name the op, the argument and the accepted dtypes.
#pragma once
#include <cstdint>

#include "kernels/core/check.h"

// In an op's entry point: `if (!x.is_cpu()) AMOR_ON_CUDA(op, x, return my_op_cuda(...));` runs the
// statement in a CUDA build (where the *_cuda functions exist, defined under #ifdef
// AMOR_HAVE_CUDA); a build without CUDA has no cuda tensors, and names the op if one arrives.
#ifdef AMOR_HAVE_CUDA
#define AMOR_ON_CUDA(op, t, ...) \
  do {                           \
    __VA_ARGS__;                 \
  } while (0)
#else
#define AMOR_ON_CUDA(op, t, ...) ::amor::fail_no_cuda(op, t)
#endif

namespace amor {

// t is an f32 or bf16 tensor (the storage dtypes of the CUDA kernels).
inline void check_cuda_storage(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  AMOR_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16,
             "{}: argument '{}' is {}; on cuda this op takes f32 or bf16", op, name, t.str());
}

// t has exactly dtype d on cuda; `why` says what the argument is (e.g. "f32 statistics").
inline void check_cuda_dtype(const char* op, const char* name, const Tensor& t, DType d,
                             const char* why) {
  check_defined(op, name, t);
  AMOR_CHECK(t.dtype() == d, "{}: argument '{}' is {}; on cuda it must be {} ({})", op, name,
             t.str(), dtype_name(d), why);
}

// t lives on the cuda device (for arguments not covered by check_float_args).
inline void check_on_cuda(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  AMOR_CHECK(!t.is_cpu(), "{}: argument '{}' is {}, expected a cuda tensor like the others", op,
             name, t.str());
}

// Counts above 2^31 - 1 elements per row are not supported by the row kernels' int indices.
inline void check_cuda_int_range(const char* op, const char* what, int64_t v) {
  AMOR_CHECK(v <= int64_t(0x7fffffff), "{}: {} = {} is too large for the cuda kernels (max {})",
             op, what, v, int64_t(0x7fffffff));
}

}  // namespace amor
