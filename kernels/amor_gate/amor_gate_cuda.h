// CUDA launchers of AMOR's gate ops (raw device pointers; checks in amor_gate.cpp, math in
// amor_gate_ref.h). Values are f32; statistics and state are f64. Every launch goes on stream s
// and nothing is read back to the host.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/amor_gate/amor_gate_ref.h"

namespace amor::cuda {

// Bytes of device scratch that entropy_stats needs for n values.
int64_t entropy_stats_scratch_bytes(int64_t n);
// out[0] = lower median, out[1] = unbiased std (NaN for n < 2) of x[0..n), n >= 1.
void entropy_stats(const float* x, int64_t n, void* scratch, double* out, cudaStream_t s = 0);
// out[3] = state[3] after one EMA step with stats[2] (may alias nothing; one thread).
void amor_gate_update(const double* state, const double* stats, const ref::AmorGateRule& rule,
                      double* out, cudaStream_t s = 0);
// gate[i] = 1[double(H[i]) > state[kGateTau]].
void amor_gate_mask(const float* H, int64_t n, const double* state, uint8_t* gate,
                    cudaStream_t s = 0);

}  // namespace amor::cuda
