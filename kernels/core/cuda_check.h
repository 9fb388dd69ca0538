// Every CUDA runtime call is checked; a failure names the call, the file and the line.
//
// .cu files include this and not error.h: nvcc cannot compile fmt 9's compile-time format checks,
// so CUDA sources take raw pointers and sizes, report through cuda_fail(), and leave argument
// checking (with shapes in the message) to the op's Tensor-level entry point in a .cpp file.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace amor {
[[noreturn]] void cuda_fail(const char* file, int line, const char* call, const char* what);
// Throws OutOfMemory (error.h) for a device allocation of `bytes` that failed with `free` of
// `total` bytes left on the device.
[[noreturn]] void cuda_out_of_memory(size_t bytes, size_t free, size_t total);
}

#define AMOR_CUDA_CHECK(call)                                                               \
  do {                                                                                      \
    cudaError_t amor_cuda_err_ = (call);                                                    \
    if (amor_cuda_err_ != cudaSuccess)                                                      \
      ::amor::cuda_fail(__FILE__, __LINE__, #call, cudaGetErrorString(amor_cuda_err_));     \
  } while (0)

// After a kernel launch: the launch configuration error, if any.
#define AMOR_CUDA_CHECK_LAUNCH() AMOR_CUDA_CHECK(cudaGetLastError())
