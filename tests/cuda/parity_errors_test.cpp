// Arguments the CUDA paths refuse, each with the message that names the op, the argument and what
// it accepts (the dtype rules of design §2 and the kernels' limits). Skipped without a GPU.
#include "kernels/adamw/adamw.h"
#include "kernels/cast/cast.h"
#include "kernels/conv1d/conv1d.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/grad_norm/grad_norm.h"
#include "kernels/l2norm/l2norm.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "kernels/swiglu/swiglu.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

Tensor gpu(const Shape& shape, DType d) {
  return up(input(shape, 7, DType::F32), d);  // f64 and bf16 alike: values converted on the cpu
}

TEST(CudaErrors, StorageDtypesOtherThanF32AndBf16) {
  AMOR_REQUIRE_GPU();
  Tensor x64 = gpu({2, 4}, DType::F64), w64 = gpu({4}, DType::F64);
  EXPECT_EQ(error_of([&] { rmsnorm_forward(x64, w64, 1e-5); }),
            "rmsnorm_forward: argument 'x' is f64[2,4]@cuda; on cuda this op takes f32 or bf16");
  EXPECT_EQ(error_of([&] { swiglu_forward(x64, x64); }),
            "swiglu_forward: argument 'g' is f64[2,4]@cuda; on cuda this op takes f32 or bf16");
  EXPECT_EQ(error_of([&] { add(x64, x64); }),
            "add: argument 'a' is f64[2,4]@cuda; on cuda this op takes f32 or bf16");
  std::vector<Tensor> grads{gpu({2}, DType::F64)};
  EXPECT_EQ(error_of([&] { sum_of_squares(grads); }),
            "sum_of_squares: argument 'grads[0]' is f64[2]@cuda; on cuda this op takes f32 or "
            "bf16");
  EXPECT_EQ(error_of([&] { cast(gpu({3}, DType::F64), DType::BF16); }),
            "cast: on cuda only f32 and bf16 convert, got f64[3]@cuda -> bf16");
  Tensor x32 = gpu({3}, DType::F32);
  EXPECT_EQ(error_of([&] { cast(x32, DType::F16); }),
            "cast: on cuda only f32 and bf16 convert, got f32[3]@cuda -> f16");
}

TEST(CudaErrors, StatisticsAreF32) {
  AMOR_REQUIRE_GPU();
  Tensor x = gpu({2, 8}, DType::BF16), w = gpu({8}, DType::BF16);
  Tensor rstd16 = gpu({2}, DType::BF16);
  EXPECT_EQ(error_of([&] { rmsnorm_backward(x, w, rstd16, x); }),
            "rmsnorm_backward: argument 'rstd' is bf16[2]@cuda; on cuda it must be f32 (the "
            "forward's f32 statistics)");
  EXPECT_EQ(error_of([&] { l2norm_backward(x, Tensor::zeros({2}, DType::F32), x); }),
            "l2norm_backward: argument 'rstd' is f32[2]@cpu, expected a cuda tensor like the "
            "others");
}

TEST(CudaErrors, AdamwTakesF32MasterWeightsAndMoments) {
  AMOR_REQUIRE_GPU();
  Tensor p16 = gpu({4}, DType::BF16), g = gpu({4}, DType::BF16);
  Tensor m = gpu({4}, DType::F32), v = gpu({4}, DType::F32), p = gpu({4}, DType::F32);
  EXPECT_EQ(error_of([&] { adamw_step(p16, g, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1); }),
            "adamw_step: argument 'param' is bf16[4]@cuda; on cuda it must be f32 (f32 master "
            "weights and moments)");
  Tensor g_cpu = Tensor::zeros({4}, DType::F32);
  EXPECT_EQ(error_of([&] { adamw_step(p, g_cpu, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1); }),
            "adamw_step: argument 'grad' is f32[4]@cpu, expected a cuda tensor like the others");
}

TEST(CudaErrors, MixedDtypesOnlyWhereDocumented) {
  AMOR_REQUIRE_GPU();
  Tensor a16 = gpu({3}, DType::BF16), b32 = gpu({3}, DType::F32);
  // add_ accepts an f32 accumulator with a bf16 addend, not the other way round.
  EXPECT_EQ(error_of([&] { add_(a16, b32); }),
            "add_: arguments 'a' (bf16[3]@cuda) and 'b' (f32[3]@cuda) have different dtypes");
}

TEST(CudaErrors, Conv1dKernelSizeLimit) {
  AMOR_REQUIRE_GPU();
  Tensor x = gpu({1, 4, 2}, DType::F32), w = gpu({2, 9}, DType::F32);
  EXPECT_EQ(error_of([&] { conv1d_forward(x, w, Tensor(), true); }),
            "conv1d_forward: kernel size K=9 is not supported on cuda (K <= 8)");
}

TEST(CudaErrors, EmbeddingIdsAreCheckedOnTheDevice) {
  AMOR_REQUIRE_GPU();
  Tensor ids = Tensor::from_vector<int32_t>({2, 2}, {1, 2, 3, 70}).to(Device::CUDA);
  Tensor w = gpu({50, 8}, DType::BF16);
  EXPECT_EQ(error_of([&] { embedding_forward(ids, w); }),
            "embedding_forward: id 70 at position 3 of ids i32[2,2]@cuda is out of range for "
            "vocabulary size V=50");
  Tensor neg = Tensor::from_vector<int32_t>({3}, {4, -1, -2}).to(Device::CUDA);
  EXPECT_EQ(error_of([&] { embedding_backward(neg, gpu({3, 8}, DType::BF16), 50); }),
            "embedding_backward: id -1 at position 1 of ids i32[3]@cuda is out of range for "
            "vocabulary size V=50");
  Tensor cpu_ids = Tensor::from_vector<int32_t>({1}, {0});
  EXPECT_EQ(error_of([&] { embedding_forward(cpu_ids, w); }),
            "embedding_forward: ids i32[1]@cpu and weight bf16[50,8]@cuda are on different "
            "devices");
}

TEST(CudaErrors, RopePositionsAreCheckedWhereverTheyLive) {
  AMOR_REQUIRE_GPU();
  Tensor x = gpu({1, 5, 2, 8}, DType::BF16);
  Tensor pos = Tensor::from_vector<int64_t>({5}, {0, 1, -1, 3, 4}).to(Device::CUDA);
  EXPECT_EQ(error_of([&] { rope_forward_positions(x, pos); }),
            "rope_forward_positions: position -1 at index 2 of positions i64[5]@cuda is negative");
}

}  // namespace
}  // namespace amor::parity
