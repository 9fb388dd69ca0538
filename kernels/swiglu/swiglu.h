// SwiGLU activation h = silu(g) * u on tensors of any (equal) shape.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

Tensor swiglu_forward(const Tensor& g, const Tensor& u);

struct SwigluGrads {
  Tensor dg, du;
};
SwigluGrads swiglu_backward(const Tensor& g, const Tensor& u, const Tensor& dh);

}  // namespace amor
