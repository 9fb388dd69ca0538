// AMOR's entropy gate as three ops on the device that holds the entropies (math: amor_gate_ref.h),
// so that a training forward on the GPU decides its gates without a host round trip:
//
//   stats = amor_entropy_stats(H_all)               f64 [2] {median, unbiased std}
//   state = amor_gate_update(state, stats, rule)    f64 [3] {m, s, tau}, one EMA step
//   gate  = amor_gate_mask(H, state)                u8, 1[H > tau]
//
// Each returns a new tensor on its inputs' device and never reads anything back to the host (the
// state is replaced, not written in place, so a caller may keep an earlier state as the snapshot
// of the threshold a forward used). On the cpu the values are f32 or f64 and the reference runs;
// on cuda they are f32 (lm_head_entropy's output there) and the kernels of amor_gate_cuda.cu run:
// the median is exact (a radix select over the float bits: it is one of the inputs), the std is
// summed in double in a fixed order (deterministic, equal to the cpu's to rounding), the EMA and
// tau are the cpu's expressions rounded the same way.
#pragma once
#include "kernels/amor_gate/amor_gate_ref.h"
#include "kernels/core/tensor.h"

namespace amor {

using ref::AmorGateRule;

// Median (lower middle value for an even count) and unbiased std (NaN for fewer than two values)
// of every element of values (any shape, at least one element); f64 [2] on values' device.
Tensor amor_entropy_stats(const Tensor& values);

// The state after one EMA step: state and stats f64 [3] and [2] on one device. Outside training
// there is no step: the state is used as it is.
Tensor amor_gate_update(const Tensor& state, const Tensor& stats, const AmorGateRule& rule);

// The state {m, s, tau} for the host values m, s (tau from the rule), as an f64 [3] cpu tensor.
Tensor amor_gate_state(double m, double s, const AmorGateRule& rule);

// u8 of H's shape: 1 where double(H) > state[2] (tau). state f64 [3] on H's device.
Tensor amor_gate_mask(const Tensor& H, const Tensor& state);

}  // namespace amor
