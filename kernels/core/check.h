// Argument checks shared by every op's Tensor-level entry point. Each throws amor::Error with a
// message that names the op, the argument and the shapes, e.g.
//   "rmsnorm_forward: argument 'w' is f32[63]@cpu, expected shape [64]"
// A dimension given as kAny in an expected shape matches any size.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor {

inline constexpr int64_t kAny = -1;

// t is defined and has exactly this shape (kAny matches any size).
void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected);
// t has this many dimensions.
void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim);
void check_dtype(const char* op, const char* name, const Tensor& t, DType dtype);
void check_defined(const char* op, const char* name, const Tensor& t);
// All given tensors are on one device and share one floating dtype (f32 or f64 on the cpu).
void check_float_args(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> args);
// An op that exists only on the cpu so far names itself when handed cuda tensors.
[[noreturn]] void fail_no_cuda(const char* op, const Tensor& t);

// Calls f(float{}) or f(double{}) according to t's dtype; other dtypes are an error naming op.
template <class F>
void dispatch_float(const char* op, const Tensor& t, F&& f) {
  if (t.dtype() == DType::F32) {
    f(float{});
  } else if (t.dtype() == DType::F64) {
    f(double{});
  } else {
    throw Error(fmt::format("{}: the cpu reference computes in f32 or f64, got {}", op, t.str()));
  }
}

}  // namespace amor
