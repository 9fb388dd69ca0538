#include "kernels/linear/gemm_cpu.h"

#include <cblas.h>

#include <climits>
#include <type_traits>

#include "kernels/core/error.h"

namespace amor {

template <class T>
void gemm_cpu(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  AMOR_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm_cpu: negative size M={} N={} K={}", M, N, K);
  AMOR_CHECK(lda >= (transA ? M : K) && ldb >= (transB ? K : N) && ldc >= N,
             "gemm_cpu: leading dimensions lda={} ldb={} ldc={} too small for M={} N={} K={} "
             "(transA={}, transB={})",
             lda, ldb, ldc, M, N, K, transA, transB);
  // CBLAS takes int sizes (OpenBLAS without INTERFACE64).
  for (int64_t v : {M, N, K, lda, ldb, ldc})
    AMOR_CHECK(v <= INT_MAX, "gemm_cpu: size {} exceeds the BLAS int range (M={} N={} K={})", v, M,
               N, K);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // the product is empty: BLAS would reject lda = 0, and C = beta * C is all it does
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  // BLAS asks for leading dimensions >= 1 even for a single column.
  auto ld = [](int64_t v) { return static_cast<int>(v < 1 ? 1 : v); };
  const CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), alpha, A, ld(lda), B, ld(ldb), beta,
                C, ld(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), alpha, A, ld(lda), B, ld(ldb), beta,
                C, ld(ldc));
  }
}

template void gemm_cpu<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                              const float*, int64_t, float, float*, int64_t);
template void gemm_cpu<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                               int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace amor
