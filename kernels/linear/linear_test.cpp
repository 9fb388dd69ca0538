#include "kernels/linear/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/linear/gemm_cpu.h"
#include "kernels/linear/linear_ref.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;
using testing::rel_rms;

TEST(Linear, GradcheckDouble) {
  Tensor x = randn({2, 5, 7}, 1), w = randn({9, 7}, 2);
  Tensor dy = randn({2, 5, 9}, 3);
  LinearGrads g = linear_backward(x, w, dy);
  auto reports = gradcheck([&] { return std::vector<Tensor>{linear_forward(x, w)}; }, {dy},
                           {{"x", x, g.dx}, {"w", w, g.dw}});
  for (auto& r : reports) RecordProperty(r.name, fmt::format("{:.2e}", r.error));
}

TEST(Linear, NeedDxFalseSkipsDxAndKeepsDw) {
  Tensor x = randn({6, 5}, 4), w = randn({3, 5}, 5), dy = randn({6, 3}, 6);
  LinearGrads all = linear_backward(x, w, dy);
  LinearGrads only_w = linear_backward(x, w, dy, /*need_dx=*/false);
  EXPECT_FALSE(only_w.dx.defined());
  EXPECT_EQ(testing::max_abs_diff(only_w.dw, all.dw), 0.0);
}

// The BLAS path equals the plain loops, forward and backward, for both dtypes.
template <class T>
void expect_blas_matches_loops(DType dt, double tol) {
  const int64_t n = 13, in = 37, out = 29;
  Tensor x = randn({n, in}, 7, dt), w = randn({out, in}, 8, dt), dy = randn({n, out}, 9, dt);
  Tensor y = linear_forward(x, w);
  LinearGrads g = linear_backward(x, w, dy);
  Tensor y_ref = Tensor::empty({n, out}, dt), dx_ref = Tensor::empty({n, in}, dt),
         dw_ref = Tensor::empty({out, in}, dt);
  ref::linear_forward(x.data<T>(), w.data<T>(), y_ref.data<T>(), n, in, out);
  ref::linear_backward(x.data<T>(), w.data<T>(), dy.data<T>(), dx_ref.data<T>(), dw_ref.data<T>(),
                       n, in, out);
  EXPECT_LT(rel_rms(y, y_ref), tol);
  EXPECT_LT(rel_rms(g.dx, dx_ref), tol);
  EXPECT_LT(rel_rms(g.dw, dw_ref), tol);
}

TEST(Linear, BlasMatchesLoopReference) {
  expect_blas_matches_loops<double>(DType::F64, 1e-13);
  expect_blas_matches_loops<float>(DType::F32, 1e-6);
}

// gemm_cpu in every transpose combination, with strided operands, alpha, beta, against ref::gemm.
TEST(GemmCpu, MatchesLoopGemmForAllTransposesAndStrides) {
  const int64_t M = 11, N = 7, K = 19, pad = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
      const int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
      const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
      Tensor A = randn({a_rows, lda}, 10), B = randn({b_rows, ldb}, 11), C0 = randn({M, ldc}, 12);
      Tensor C = C0.clone(), C_ref = C0.clone();
      gemm_cpu<double>(ta, tb, M, N, K, 0.7, A.data<double>(), lda, B.data<double>(), ldb, -1.3,
                       C.data<double>(), ldc);
      ref::gemm<double>(ta, tb, M, N, K, 0.7, A.data<double>(), lda, B.data<double>(), ldb, -1.3,
                        C_ref.data<double>(), ldc);
      EXPECT_LT(rel_rms(C, C_ref), 1e-13) << "transA=" << ta << " transB=" << tb;
      // The padding columns of C are left alone.
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(C.item(m * ldc + j), C0.item(m * ldc + j));
    }
  }
}

TEST(GemmCpu, BetaZeroIgnoresGarbageInC) {
  const int64_t M = 4, N = 5, K = 3;
  Tensor A = randn({M, K}, 13), B = randn({K, N}, 14);
  Tensor C = Tensor::full<double>({M, N}, std::numeric_limits<double>::quiet_NaN());
  Tensor C_ref = Tensor::empty({M, N}, DType::F64);
  gemm_cpu<double>(false, false, M, N, K, 1.0, A.data<double>(), B.data<double>(), 0.0,
                   C.data<double>());
  ref::gemm<double>(false, false, M, N, K, 1.0, A.data<double>(), K, B.data<double>(), N, 0.0,
                    C_ref.data<double>(), N);
  EXPECT_LT(rel_rms(C, C_ref), 1e-14);
}

TEST(GemmCpu, EmptyInnerDimensionScalesC) {
  Tensor C = Tensor::full<float>({2, 3}, std::numeric_limits<float>::quiet_NaN());
  gemm_cpu<float>(false, true, 2, 3, 0, 1.f, nullptr, nullptr, 0.f, C.data<float>());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(C.item(i), 0.0);
  Tensor x = Tensor::zeros({4, 0}, DType::F32), w = Tensor::zeros({3, 0}, DType::F32);
  Tensor y = linear_forward(x, w);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.item(i), 0.0);
}

TEST(Linear, BadInputsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({4, 7}, DType::F32), w = Tensor::zeros({5, 8}, DType::F32);
  try {
    linear_forward(x, w);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "linear_forward: argument 'w' is f32[5,8]@cpu, expected shape [*,7]");
  }
  Tensor w_ok = Tensor::zeros({5, 7}, DType::F32);
  try {
    linear_backward(x, w_ok, Tensor::zeros({4, 6}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "linear_backward: argument 'dy' is f32[4,6]@cpu, expected shape [4,5]");
  }
  EXPECT_THROW(linear_forward(x, Tensor::zeros({5, 7}, DType::F64)), Error);
  EXPECT_THROW(linear_forward(x, Tensor::zeros({35}, DType::F32)), Error);
  EXPECT_THROW(linear_forward(Tensor::zeros({4, 7}, DType::I32), Tensor::zeros({5, 7}, DType::I32)),
               Error);
  EXPECT_THROW(linear_forward(Tensor(), w_ok), Error);
}

}  // namespace
}  // namespace amor
