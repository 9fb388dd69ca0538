// The CUDA backend: device memory, copies and synchronisation on the current device's stream.
// Compiled only when CUDA is enabled; cuda_backend_or_null() returns nullptr on machines where the
// runtime finds no GPU, so a CUDA build still runs everything on the CPU there.
#include <cuda_runtime.h>

#include "kernels/core/backend.h"
#include "kernels/core/cuda_check.h"

namespace amor {
namespace {

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::CUDA; }
  void* raw_allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky, but the next launch check would read it as its own error
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      cuda_out_of_memory(bytes, free, total);
    }
    AMOR_CUDA_CHECK(err);
    return p;
  }
  void raw_free(void* p) override { AMOR_CUDA_CHECK(cudaFree(p)); }
  // Zeroing and device-to-device copies are enqueued on the compute stream (the per-thread
  // default stream: kernels/CMakeLists.txt) like a kernel, so that stream capture records them.
  void memset_zero(void* p, size_t bytes) override {
    AMOR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    AMOR_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    AMOR_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    AMOR_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
  }
  void synchronize() override { AMOR_CUDA_CHECK(cudaDeviceSynchronize()); }

  // Relaxed mode: the caching allocator may cudaMalloc a new block while a capture runs (its
  // private pool keeps it for the graph's lifetime; caching_allocator.h).
  void begin_capture() override {
    AMOR_CUDA_CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
  }
  void* end_capture() override {
    cudaGraph_t graph = nullptr;
    AMOR_CUDA_CHECK(cudaStreamEndCapture(cudaStreamPerThread, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    AMOR_CUDA_CHECK(err);
    return exec;
  }
  void abort_capture() override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(cudaStreamPerThread, &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      cudaGraph_t graph = nullptr;
      if (cudaStreamEndCapture(cudaStreamPerThread, &graph) == cudaSuccess && graph)
        cudaGraphDestroy(graph);
    }
    cudaGetLastError();  // an invalidated capture leaves its error behind: not the next op's
  }
  void launch_graph(void* graph) override {
    AMOR_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), cudaStreamPerThread));
  }
  void destroy_graph(void* graph) override {
    if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }
};

}  // namespace

Backend* cuda_backend_or_null() {
  static Backend* instance = []() -> Backend* {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();  // clear the sticky "no device" error
      return nullptr;
    }
    return new CudaBackend();
  }();
  return instance;
}

}  // namespace amor
