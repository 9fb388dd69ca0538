// The backward's sequential pass with whole heads per block (gated_delta_state_bwd_cuda.cu), as
// gated_delta_bwd_cuda.cu calls it. Included by .cu files only, after gated_delta_cuda_common.cuh.
#pragma once
#include "kernels/gated_delta/gated_delta_cuda_common.cuh"

namespace amor::cuda::gdn {

// Warps per block of the wide pass for d (<= kWideMaxWarps; 16 V columns each);
// AMOR_GDN_SBWD_WARPS (1 .. 16, read once) fixes them instead of this choice.
int state_bwd_wide_warps(const Dims& d);

// dS' per chunk into sc.dS, dVn into sc.dVn, ds0 (when non-null): bf16, d.K one of kRegStateK,
// d.V a multiple of 16, q, k, dO 16-byte aligned (reg_state_ok and the caller's checks).
void launch_state_bwd_wide(const bf16_t* q, const bf16_t* k, const bf16_t* dO, const void* dsf,
                           bool dsf_f32, float scale, const Dims& d, const Scratch<bf16_t>& sc,
                           float* ds0, cudaStream_t stream);

}  // namespace amor::cuda::gdn
