// Dtype conversion of tensors on either device: f32 master weights to bf16 compute weights, bf16
// gradients to f32 for the reduction, and back.
//
// On the cpu every dtype converts to every other (Tensor::to). On cuda the kernels convert between
// f32 and bf16 (round to nearest even, bit-identical to amor::bf16 on the cpu, NaN stays NaN);
// other pairs are an error naming the op.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

// A tensor of dtype `to` on x's device. Like Tensor::to(DType), a tensor already of that dtype is
// returned as is (a handle sharing storage), not copied.
Tensor cast(const Tensor& x, DType to);

// Converts src into the existing tensor dst (same shape and device; dst's dtype is the target),
// e.g. into a slice of a flat bf16 buffer. src and dst must not overlap unless they are the same
// tensor of the same dtype.
void cast_into(const Tensor& src, Tensor& dst);

}  // namespace amor
