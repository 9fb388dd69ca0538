// CUDA launcher of the AdamW step (raw device pointers; checks in adamw.cpp). param, m and v are
// f32 (design §2: f32 master weights and moments); grad is f32 or bf16.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

void adamw_step(float* param, DType grad_dtype, const void* grad, float* m, float* v, int64_t n,
                int64_t step, double lr, double beta1, double beta2, double eps,
                double weight_decay, cudaStream_t s = 0);

}  // namespace amor::cuda
