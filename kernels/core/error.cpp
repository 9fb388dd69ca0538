#include "kernels/core/error.h"

namespace amor {

// Declared in cuda_check.h; defined here so that CUDA sources never instantiate fmt.
[[noreturn]] void cuda_fail(const char* file, int line, const char* call, const char* what) {
  throw Error(fmt::format("CUDA error at {}:{}: {} returned {}", file, line, call, what));
}

}  // namespace amor
