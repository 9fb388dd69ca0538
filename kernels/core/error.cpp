#include "kernels/core/error.h"

namespace amor {

// Declared in cuda_check.h (both); defined here so that CUDA sources never instantiate fmt.
[[noreturn]] void cuda_fail(const char* file, int line, const char* call, const char* what) {
  throw Error(fmt::format("CUDA error at {}:{}: {} returned {}", file, line, call, what));
}

[[noreturn]] void cuda_out_of_memory(size_t bytes, size_t free, size_t total) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw OutOfMemory(fmt::format("CUDA out of memory: cudaMalloc of {:.2f} GiB with {:.2f} GiB of {:.2f} GiB free",
                                bytes / kGiB, free / kGiB, total / kGiB));
}

}  // namespace amor
