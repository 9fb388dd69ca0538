// A Backend owns a device's memory and its copies. The CPU backend is always there; the CUDA
// backend exists when amor-run was built with CUDA (AMOR_HAVE_CUDA) and a GPU is present.
//
// Ops do not go through this interface for their arithmetic: each op's Tensor-level entry point
// dispatches on the tensors' device to its CPU reference or its CUDA kernel. The backend is what
// Tensor needs to exist on a device: raw allocation, zeroing, copies, synchronisation.
#pragma once
#include <cstddef>
#include <memory>

#include "kernels/core/dtype.h"

namespace amor {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual void* raw_allocate(size_t bytes) = 0;
  virtual void raw_free(void* p) = 0;
  virtual void memset_zero(void* p, size_t bytes) = 0;
  // Copies between this backend's memory and host memory (or within this backend).
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // CUDA graphs (models/infer/decode_graph.h). Capture records the work every op enqueues on this
  // thread's compute stream between begin_capture() and end_capture() (nothing runs), which
  // returns an instantiated graph; launch_graph() replays it on that stream. Inside a capture
  // nothing may wait for the device: no copy to or from the host, no synchronize(). abort_capture()
  // ends a capture that failed half-way and drops what was recorded. The defaults (the cpu) throw
  // amor::Error: a graph needs CUDA.
  virtual void begin_capture();
  virtual void* end_capture();
  virtual void abort_capture();
  virtual void launch_graph(void* graph);
  virtual void destroy_graph(void* graph);
};

// The backend of a device; throws amor::Error if the device is not available in this build or
// on this machine.
Backend& backend(Device d);
bool cuda_available();

// Implemented in cuda_backend.cu when built with CUDA; returns nullptr when no GPU is usable.
Backend* cuda_backend_or_null();

}  // namespace amor
