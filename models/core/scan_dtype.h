// The scans' dtypes on each backend, in one place.
//
// On the GPU the recurrent scans (Mamba2's SSD, the gated delta rule) take their decay inputs (dt,
// A, D, g, beta) and keep their states in f32 (design §2: f32 statistics; a bf16 decay compounded
// over thousands of steps drifts), while activations are bf16. On the cpu every tensor of a model
// shares the model's dtype, so these are identities there and the cpu numerics are untouched.
#pragma once
#include "kernels/cast/cast.h"
#include "kernels/core/tensor.h"

namespace amor::model {

// t as the scans take it: f32 on cuda, unchanged on the cpu.
inline Tensor scan_input(const Tensor& t) {
  return t.defined() && !t.is_cpu() && t.dtype() != DType::F32 ? cast(t, DType::F32) : t;
}

// The dtype of a scan's state for activations like x: f32 on cuda, x's dtype on the cpu.
inline DType scan_state_dtype(const Tensor& x) { return x.is_cpu() ? x.dtype() : DType::F32; }

// A gradient g in the dtype of the tensor it belongs to (an f32 scan gradient flowing back into
// bf16 activations on cuda); unchanged when the dtypes agree.
inline Tensor grad_like(const Tensor& g, const Tensor& like) {
  return g.defined() && g.dtype() != like.dtype() ? cast(g, like.dtype()) : g;
}

}  // namespace amor::model
