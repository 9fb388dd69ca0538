// Argument checks shared by the plain and gated RMSNorm entry points (internal to kernels/rmsnorm).
#pragma once
#include <cmath>

#include "kernels/core/check.h"

namespace amor::rmsnorm_detail {

// x is [..., D] with D >= 1 and w is [D]; returns the number of rows, x.numel() / D.
inline int64_t check_x_w(const char* op, const Tensor& x, const Tensor& w) {
  check_defined(op, "x", x);
  AMOR_CHECK(x.dim() >= 1 && x.size(-1) > 0,
             "{}: argument 'x' is {}, expected at least 1 dimension and a non-empty last one", op,
             x.str());
  check_shape(op, "w", w, {x.size(-1)});
  return x.numel() / x.size(-1);
}

inline void check_eps(const char* op, double eps) {
  AMOR_CHECK(std::isfinite(eps) && eps >= 0, "{}: eps must be finite and >= 0, got {}", op, eps);
}

}  // namespace amor::rmsnorm_detail
