// CUDA == cpu reference for router_mlp_forward (AMOR's fitted entropy router at a decode step;
// kernels/router_mlp/router_mlp.h): x f32 and bf16 (the values rounded to bf16 on both sides),
// 1, 5 and 16 rows, the router's shape (W 512) at d 96 and an odd d and W (a partly filled last
// block of hidden units); f32 parameters. The GPU's f32 sums against the cpu's double: rel_rms
// 1e-5. The same inputs twice give the same bits (the sums' order is fixed: graph replay = eager).
// Too many rows are refused with the op's name.
#include "kernels/router_mlp/router_mlp.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

TEST(CudaParity, RouterMlp) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 9700;
  for (const auto& [d, W] : {std::pair<int64_t, int64_t>{96, 512}, {37, 19}}) {
    const Tensor w1 = input({W, d}, ++seed, DType::F32, 0.1), b1 = input({W}, ++seed, DType::F32, 0.1);
    const Tensor w2 = input({1, W}, ++seed, DType::F32, 0.05), u = input({1, d}, ++seed, DType::F32, 0.1);
    const Tensor b2 = input({1}, ++seed, DType::F32);
    auto gpu = [](const Tensor& t) { return t.to(Device::CUDA); };
    const Tensor gw1 = gpu(w1), gb1 = gpu(b1), gw2 = gpu(w2), gu = gpu(u), gb2 = gpu(b2);
    for (DType dt : {DType::F32, DType::BF16}) {
      for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{16}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n) + " d " + std::to_string(d));
        const Tensor x = input({n, d}, ++seed, dt);
        const Tensor ref = router_mlp_forward(x, w1, b1, w2, u, b2);
        poison({{{n}, DType::F32}});
        const Tensor got = router_mlp_forward(up(x, dt), gw1, gb1, gw2, gu, gb2);
        EXPECT_EQ(got.dtype(), DType::F32);
        expect_close("router_mlp", "y", got, ref, kF32Tol);
        const Tensor again = router_mlp_forward(up(x, dt), gw1, gb1, gw2, gu, gb2);
        expect_equal("router_mlp", "y twice", again, down(got));
      }
    }
    const Tensor many = up(input({kRouterMlpMaxRows + 1, d}, ++seed, DType::F32), DType::F32);
    EXPECT_NE(error_of([&] { router_mlp_forward(many, gw1, gb1, gw2, gu, gb2); }).find("router_mlp_forward"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace amor::parity
