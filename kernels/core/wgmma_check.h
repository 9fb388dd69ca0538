// A check of the warpgroup MMA helpers (kernels/core/wgmma.cuh) on the GPU: one 64 x 16 x 64
// product D = A B computed the ways the kernels use (A from registers with B k_major or
// mn_major, A and B from shared memory, and an N = 32 product of B's second half), so that a wrong descriptor or fragment layout shows up
// as a wrong small product rather than as a wrong gated delta rule. tests/cuda runs it against
// the CPU (CudaParity.WgmmaLayouts); it needs an sm_90a GPU (or the emulator).
#pragma once
#include <cstdint>
#include <vector>

namespace amor::cuda {

struct WgmmaCheckOut {
  std::vector<float> rs, rs_trans, ss;  // D [64][64] row-major, one per way
  std::vector<float> rs_n32_hi;         // D [64][32 ..64) by an N = 32 product (A in registers)
};

// a: A [64][16], b: B [16][64], row-major bf16 bits. swap_strides exchanges every operand's two
// strides (LBO and SBO): the test runs it too, so that a mismatch says which convention the
// hardware follows.
WgmmaCheckOut wgmma_layout_check(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                 bool swap_strides);

}  // namespace amor::cuda
