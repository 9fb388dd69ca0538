// CUDA launchers of RMSNorm, plain and gated (raw device pointers; checks in rmsnorm.cpp and
// rmsnorm_gated.cpp). x, z, w, y, dy, dx, dz have dtype t (f32 or bf16); the saved statistics
// rstd and the weight gradient dw are f32 (design §2: f32 statistics, f32 parameter gradients).
// Rows are [rows, d]; each row's d channels form d / group groups normalised separately (plain
// RMSNorm: group = d, gate None).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

enum class NormGate {
  None,            // y = rmsnorm(x) * w
  NormBeforeGate,  // y = rmsnorm_group(x) * w * silu(z)        (Gated DeltaNet)
  GateBeforeNorm,  // y = rmsnorm_group(x * silu(z)) * w        (Mamba2)
};

// y [rows, d], rstd [rows, d / group].
void rmsnorm_forward(DType t, NormGate gate, const void* x, const void* z, const void* w, void* y,
                     float* rstd, int64_t rows, int64_t d, int64_t group, double eps,
                     cudaStream_t s = 0);

// Floats of scratch the backward needs (per-block partial sums of dw).
int64_t rmsnorm_backward_scratch_floats(int64_t rows, int64_t d);
// dx [rows, d], dz [rows, d] (gated only; null for None), dw [d].
void rmsnorm_backward(DType t, NormGate gate, const void* x, const void* z, const void* w,
                      const float* rstd, const void* dy, void* dx, void* dz, float* dw,
                      float* scratch, int64_t rows, int64_t d, int64_t group, cudaStream_t s = 0);

}  // namespace amor::cuda
