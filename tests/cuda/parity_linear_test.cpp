// CUDA (cuBLASLt) == cpu reference for the linear layer y = x W^T, forward and backward (dx, and
// dw in f32), at the 1.5B model's shapes and at awkward ones. LinearSmall runs in the CPU
// emulator too (where a plain GEMM kernel stands in for cuBLASLt, see gemm_cuda.cu); Linear holds
// the realistic shapes, for the GPU.
#include "kernels/linear/linear.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};

struct LinearCase {
  Shape x;      // [..., in]
  int64_t out;
};

// dw sums over every row of x: in f32 (cpu and GPU alike) a long reduction, still far inside
// 1e-5 relative RMS for N(0, 1) inputs; from bf16 inputs the products are exact in f32 and the
// result is f32, so bf16 is held to the gradient tolerance with room to spare.
double dw_tol(DType dt) { return dt == DType::BF16 ? grad_tol(dt) : kF32Tol; }

void check_linear(const LinearCase& c, DType dt, uint64_t seed) {
  const int64_t in = c.x.back();
  Shape y_shape = c.x;
  y_shape.back() = c.out;
  Tensor x = input(c.x, seed, dt), w = input({c.out, in}, seed + 1, dt, 0.05);
  Tensor dy = input(y_shape, seed + 2, dt);
  Tensor gx = up(x, dt), gw = up(w, dt), gdy = up(dy, dt);

  poison({{y_shape, dt}});
  Tensor y = linear_forward(gx, gw);
  EXPECT_EQ(y.dtype(), dt);
  expect_close("linear_forward", "y", y, linear_forward(x, w), out_tol(dt));

  LinearGrads r = linear_backward(x, w, dy);
  poison({{c.x, dt}, {{c.out, in}, DType::F32}});
  LinearGrads g = linear_backward(gx, gw, gdy);
  EXPECT_EQ(g.dx.dtype(), dt);
  EXPECT_EQ(g.dw.dtype(), DType::F32);
  expect_close("linear_backward", "dx", g.dx, r.dx, grad_tol(dt));
  expect_close("linear_backward", "dw", g.dw, r.dw, dw_tol(dt));

  // Without dx only dw is formed.
  poison({{{c.out, in}, DType::F32}});
  LinearGrads g2 = linear_backward(gx, gw, gdy, /*need_dx=*/false);
  EXPECT_FALSE(g2.dx.defined());
  expect_close("linear_backward (no dx)", "dw", g2.dw, r.dw, dw_tol(dt));
}

// One token, a few rows, sizes that are not multiples of 8 (the tensor cores' 16-byte rows: the
// heuristic must pick a kernel that takes them), a [B, T, in] input, a width of 1.
const LinearCase kSmallCases[] = {{{1, 16}, 8},       {{7, 259}, 100}, {{2, 3, 100}, 259},
                                  {{5, 1}, 3},        {{3, 64}, 1},    {{33, 40}, 24}};

TEST(CudaParity, LinearSmall) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 7000;
  for (const LinearCase& c : kSmallCases)
    for (DType dt : kDtypes) check_linear(c, dt, seed += 10);
}

// The 1.5B model at 8192 tokens (B*T): d -> d (attention q/k/v/o), d -> 3d (fused qkv), d -> 2d
// (SwiGLU up/gate, d_ff = 4096), 2d -> d (down); an odd row count (8191) at d -> d.
const LinearCase kRealisticCases[] = {{{8192, 2048}, 2048},
                                      {{8192, 2048}, 6144},
                                      {{4, 2048, 2048}, 4096},
                                      {{8192, 4096}, 2048},
                                      {{8191, 2048}, 2048}};

TEST(CudaParity, Linear) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 7100;
  for (const LinearCase& c : kRealisticCases)
    for (DType dt : kDtypes) check_linear(c, dt, seed += 10);
}

// Zero rows (an empty batch) and an empty contraction (in = 0): y = 0, dw = 0, no cuBLASLt call.
TEST(CudaParity, LinearEmpty) {
  AMOR_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    Tensor w = input({4, 3}, 7200, dt);
    Tensor y0 = linear_forward(up(Tensor::zeros({0, 3}, DType::F32), dt), up(w, dt));
    EXPECT_EQ(y0.shape(), (Shape{0, 4}));
    poison({{{2, 4}, dt}, {{4, 0}, DType::F32}});
    Tensor x_empty = up(Tensor::zeros({2, 0}, DType::F32), dt);
    Tensor w_empty = up(Tensor::zeros({4, 0}, DType::F32), dt);
    Tensor y = linear_forward(x_empty, w_empty);
    expect_equal("linear_forward (in = 0)", "y", y, Tensor::zeros({2, 4}, DType::F32));
    LinearGrads g = linear_backward(up(Tensor::zeros({0, 3}, DType::F32), dt), up(w, dt),
                                    up(Tensor::zeros({0, 4}, DType::F32), dt));
    expect_equal("linear_backward (no rows)", "dw", g.dw, Tensor::zeros({4, 3}, DType::F32));
  }
}

TEST(CudaErrors, LinearDtypes) {
  AMOR_REQUIRE_GPU();
  Tensor x64 = up(input({2, 4}, 7300, DType::F32), DType::F64);
  Tensor w64 = up(input({3, 4}, 7301, DType::F32), DType::F64);
  EXPECT_EQ(error_of([&] { linear_forward(x64, w64); }),
            "linear_forward: argument 'x' is f64[2,4]@cuda; on cuda this op takes f32 or bf16");
  Tensor x16 = up(input({2, 4}, 7302, DType::F32), DType::BF16);
  Tensor w32 = up(input({3, 4}, 7303, DType::F32), DType::F32);
  EXPECT_EQ(error_of([&] { linear_forward(x16, w32); }),
            "linear_forward: arguments 'x' (bf16[2,4]@cuda) and 'w' (f32[3,4]@cuda) have "
            "different dtypes");
  Tensor dy64 = up(input({2, 3}, 7304, DType::F32), DType::F64);
  EXPECT_EQ(error_of([&] { linear_backward(x64, w64, dy64); }),
            "linear_backward: argument 'x' is f64[2,4]@cuda; on cuda this op takes f32 or bf16");
}

}  // namespace
}  // namespace amor::parity
