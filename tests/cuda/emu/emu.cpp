// The emulator's state: each emulating thread's CUDA identity, the atomics' lock, and device
// memory (see emu.h).
#include "tests/cuda/emu/emu.h"

namespace emu {

thread_local Ctx ctx;
std::mutex atomic_mu;

cudaError_t malloc_(void** p, size_t bytes) {
  const size_t rounded = (bytes + 255) / 256 * 256;  // cudaMalloc's alignment
  *p = std::aligned_alloc(256, rounded ? rounded : 256);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, 0x5A, rounded);  // garbage, as fresh device memory is
  return cudaSuccess;
}

}  // namespace emu
