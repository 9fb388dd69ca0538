// Linear layer without bias, y = x W^T, W in PyTorch's [out, in] convention. The CPU path runs
// on OpenBLAS (gemm_cpu.h); ref::linear_* in linear_ref.h are the loops it is tested against.
//
// On cuda (cuBLASLt, gemm_cuda.h): x, w, dy are f32 or bf16, one dtype; y and dx have that dtype;
// dw is always f32 (design §2: parameter gradients are f32; on the cpu dw has w's dtype). Products
// accumulate in f32; f32 inputs use true f32 (no TF32).
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
