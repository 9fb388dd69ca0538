// AdamW optimizer step with torch.optim.AdamW's semantics (see adamw_ref.h for the formula).
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

// Updates param and the moments m, v in place. All four tensors have one shape and distinct
// storage; step is 1-based; m and v start at zero before step 1. On the cpu all four share one
// dtype (f32 or f64); on cuda param, m and v are f32 and grad is f32 or bf16, and the result
// equals the cpu reference's in f32 bit for bit.
void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay);

}  // namespace amor
