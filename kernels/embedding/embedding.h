// Token embedding: y = W[ids], and its backward, the scatter-add of dy into dW.
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

// ids: i32 of any shape, each in [0, V); weight [V, D] -> y of shape ids.shape + [D].
Tensor embedding_forward(const Tensor& ids, const Tensor& weight);

// dy of shape ids.shape + [D] -> dW [vocab, D] (rows of repeated ids accumulate).
Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t vocab);

}  // namespace amor
