// CUDA launchers of the token embedding (raw device pointers; checks in embedding.cpp). The
// weight, y and dy have dtype t (f32 or bf16); ids are i32; dW is f32 (accumulated with atomics:
// a parameter gradient, reduced in f32, design §2).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

// The first id outside [0, vocab): its position in ids, or -1 when all are in range.
struct BadId {
  int64_t position = -1;
  int32_t id = 0;
};

// flag: 8 bytes of device scratch. Both launchers check every id on the device and synchronise to
// read the result (rows of bad ids are left unwritten: the caller reports the error).
// y [n, d] = weight[ids[n]].
BadId embedding_forward(DType t, const int32_t* ids, const void* weight, void* y, int64_t n,
                        int64_t vocab, int64_t d, unsigned long long* flag, cudaStream_t s = 0);
// dw [vocab, d] = scatter-add of dy [n, d] by ids (overwritten; f32).
BadId embedding_backward(DType t, const int32_t* ids, const void* dy, float* dw, int64_t n,
                         int64_t vocab, int64_t d, unsigned long long* flag, cudaStream_t s = 0);

}  // namespace amor::cuda
