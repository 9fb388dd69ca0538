// The emulator's state: each emulating thread's CUDA identity, the atomics' lock, and device
// memory (see emu.h).
#include "tests/cuda/emu/emu.h"

#include <chrono>

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

namespace {
struct Event {
  std::chrono::steady_clock::time_point t;
};
}  // namespace

cudaError_t event_create_(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new Event{});
  return cudaSuccess;
}

cudaError_t event_destroy_(cudaEvent_t e) {
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}

cudaError_t event_record_(cudaEvent_t e, cudaStream_t) {
  reinterpret_cast<Event*>(e)->t = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t event_elapsed_(float* ms, cudaEvent_t a, cudaEvent_t b) {
  const auto d = reinterpret_cast<Event*>(b)->t - reinterpret_cast<Event*>(a)->t;
  *ms = std::chrono::duration<float, std::milli>(d).count();
  return cudaSuccess;
}

cudaError_t device_properties_(cudaDeviceProp* p, int) {
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof(p->name), "CPU emulation");
  p->multiProcessorCount = 2;
  return cudaSuccess;
}

}  // namespace emu
