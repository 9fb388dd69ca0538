// Row-major GEMM on the CPU, through OpenBLAS, for every op that multiplies matrices (linear,
// attention, the LM head, the models):
//
//   C = alpha * op(A) op(B) + beta * C,   op(A) is M x K, op(B) is K x N, C is M x N
//
// A is stored [M,K] (or [K,M] when transA), B is stored [K,N] (or [N,K] when transB), all
// row-major. The strided form takes leading dimensions (elements between consecutive rows), so a
// caller can multiply one head's slice of a [B,T,H,D] tensor in place (lda = H*D). With beta == 0,
// C is written without being read (it may hold garbage or NaN), as BLAS specifies. T is float or
// double; the plain-loop version every test compares against is ref::gemm in linear_ref.h.
#pragma once
#include <cstdint>

namespace amor {

template <class T>
void gemm_cpu(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Compact operands: lda, ldb, ldc are the stored row lengths.
template <class T>
void gemm_cpu(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              const T* B, T beta, T* C) {
  gemm_cpu<T>(transA, transB, M, N, K, alpha, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}

}  // namespace amor
