#include <cstdlib>
#include <cstring>

#include "kernels/core/backend.h"
#include "kernels/core/error.h"

namespace amor {
namespace {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  void* raw_allocate(size_t bytes) override {
    // 64-byte alignment: cache lines and AVX-512 loads; sizes are already multiples of 512.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    AMOR_CHECK(p != nullptr, "cpu backend: out of memory allocating {} bytes", bytes);
    return p;
  }
  void raw_free(void* p) override { std::free(p); }
  void memset_zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_within(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void synchronize() override {}
};

}  // namespace

namespace {
[[noreturn]] void no_graphs(const char* what) {
  throw Error(fmt::format("{}: CUDA graphs need a CUDA backend (this is the {} backend)", what,
                          "cpu"));
}
}  // namespace

void Backend::begin_capture() { no_graphs("Backend::begin_capture"); }
void* Backend::end_capture() { no_graphs("Backend::end_capture"); }
void Backend::abort_capture() {}
void Backend::launch_graph(void*) { no_graphs("Backend::launch_graph"); }
void Backend::destroy_graph(void*) {}

bool cuda_available() { return cuda_backend_or_null() != nullptr; }

Backend& backend(Device d) {
  static CpuBackend cpu;
  if (d == Device::CPU) return cpu;
  Backend* gpu = cuda_backend_or_null();
  AMOR_CHECK(gpu != nullptr,
             "device 'cuda' requested, but {}",
#ifdef AMOR_HAVE_CUDA
             "no usable CUDA GPU was found on this machine");
#else
             "this amor-run was built without CUDA (configure with -DAMOR_CUDA=ON where nvcc exists)");
#endif
  return *gpu;
}

#ifndef AMOR_HAVE_CUDA
Backend* cuda_backend_or_null() { return nullptr; }
#endif

}  // namespace amor
