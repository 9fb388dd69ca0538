// Linear layer without bias, y = x W^T, W in PyTorch's [out, in] convention. The CPU path runs
// on OpenBLAS (gemm_cpu.h); ref::linear_* in linear_ref.h are the loops it is tested against.
#pragma once
#include "kernels/core/tensor.h"

namespace amor {

// x [..., in], w [out, in] -> y [..., out]
Tensor linear_forward(const Tensor& x, const Tensor& w);

struct LinearGrads {
  Tensor dx;  // [..., in]; undefined when need_dx is false
  Tensor dw;  // [out, in]
};
// dy [..., out]
LinearGrads linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy,
                            bool need_dx = true);

}  // namespace amor
