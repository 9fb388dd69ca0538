// The warpgroup MMA helpers (kernels/core/wgmma.cuh) against a plain product on the CPU: one
// 64 x 16 x 64 product, each of the three ways the kernels use them. The products of bf16 are
// exact in f32 and 16 terms add with f32 rounding only, so the tolerance is tight. The run with
// the operands' two strides exchanged must fail (it reads the tiles in another order): if it
// passes and the straight one fails, the descriptor's LBO and SBO are the other way round.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/core/dtype.h"
#include "kernels/core/wgmma_check.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

double max_error(const std::vector<float>& d, const std::vector<double>& ref) {
  double e = 0;
  for (size_t i = 0; i < d.size(); ++i) e = std::max(e, std::abs(double(d[i]) - ref[i]));
  return e;
}

TEST(CudaParity, WgmmaLayouts) {
  // Wrong operand sizes are refused before anything reaches the GPU.
  try {
    cuda::wgmma_layout_check(std::vector<uint16_t>(64 * 15), std::vector<uint16_t>(16 * 64), false);
    ADD_FAILURE() << "a 64 x 15 A was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("A is [64][16] and B [16][64]"), std::string::npos);
  }
  AMOR_REQUIRE_GPU();
  std::vector<uint16_t> a(64 * 16), b(16 * 64);
  std::vector<double> fa(a.size()), fb(b.size()), ref(64 * 64, 0.0);
  for (size_t i = 0; i < a.size(); ++i) {  // distinct small values: any misplaced element shows
    fa[i] = double(int((i * 37 + 11) % 17) - 8) / 8.0;
    a[i] = bf16(float(fa[i])).bits;  // exact: small integers / 8
  }
  for (size_t i = 0; i < b.size(); ++i) {
    fb[i] = double(int((i * 53 + 5) % 19) - 9) / 8.0;
    b[i] = bf16(float(fb[i])).bits;
  }
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 64; ++n)
      for (int k = 0; k < 16; ++k) ref[m * 64 + n] += fa[m * 16 + k] * fb[k * 64 + n];
  const cuda::WgmmaCheckOut straight = cuda::wgmma_layout_check(a, b, false);
  const cuda::WgmmaCheckOut swapped = cuda::wgmma_layout_check(a, b, true);
  // Exact: every product and partial sum is a multiple of 1/64 below 2^8.
  EXPECT_EQ(max_error(straight.rs, ref), 0.0) << "A in registers, B k_major";
  EXPECT_EQ(max_error(straight.rs_trans, ref), 0.0) << "A in registers, B mn_major";
  EXPECT_EQ(max_error(straight.ss, ref), 0.0) << "A and B k_major in shared memory";
  std::vector<double> ref_hi(64 * 32);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 32; ++n) ref_hi[m * 32 + n] = ref[m * 64 + 32 + n];
  EXPECT_EQ(max_error(straight.rs_n32_hi, ref_hi), 0.0) << "N = 32, B's second half";
  std::printf("wgmma layouts: straight %g %g %g, strides exchanged %g %g %g\n",
              max_error(straight.rs, ref), max_error(straight.rs_trans, ref),
              max_error(straight.ss, ref), max_error(swapped.rs, ref),
              max_error(swapped.rs_trans, ref), max_error(swapped.ss, ref));
  EXPECT_GT(max_error(swapped.rs, ref), 0.0);
}

}  // namespace
}  // namespace amor::parity
