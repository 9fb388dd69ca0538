// Token embedding: y = W[ids], and its backward, the scatter-add of dy into dW.
// ids live on the weight's device. Dtypes: on the cpu the weight, y, dy and dW share one dtype
// (f32 or f64); on cuda the weight, y and dy are f32 or bf16 and dW is f32 (accumulated with
// atomics, so equal to the cpu reference to f32 rounding, not bit for bit).
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

// ids: i32 of any shape, each in [0, V); weight [V, D] -> y of shape ids.shape + [D].
Tensor embedding_forward(const Tensor& ids, const Tensor& weight);

// dy of shape ids.shape + [D] -> dW [vocab, D] (rows of repeated ids accumulate).
Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t vocab);

}  // namespace amor
