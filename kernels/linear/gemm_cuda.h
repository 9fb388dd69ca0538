// Row-major GEMM on the GPU through cuBLASLt, for every op that multiplies matrices on cuda
// (linear, the LM head, attention's projections); the same convention as gemm_cpu.h:
//
//   C = alpha * op(A) op(B) + beta * C,   op(A) is M x K, op(B) is K x N, C is M x N
//
// A is stored [M,K] (or [K,M] when transA), B [K,N] (or [N,K] when transB), C [M,N], all
// row-major with leading dimensions lda, ldb, ldc (elements between consecutive rows). With
// beta == 0, C is written without being read (it may hold NaN).
//
// Dtypes: A and B share `ab` (f32 or bf16); C has `c` (f32, or bf16 when ab is bf16). Products
// are accumulated in f32 (CUBLAS_COMPUTE_32F) in every case: bf16 x bf16 on the tensor cores with
// f32 accumulation, f32 x f32 in true f32 (no TF32, so an f32 result matches the cpu to f32
// rounding). bf16 inputs with an f32 C are how parameter gradients (dW) and LM-head logits keep
// f32 precision. Raw device pointers; the Tensor-level checks live in the callers' .cpp files.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace amor::cuda {

void gemm(DType ab, DType c, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta, void* C,
          int64_t ldc, cudaStream_t stream = 0);

// Compact operands: lda, ldb, ldc are the stored row lengths.
inline void gemm(DType ab, DType c, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                 float alpha, const void* A, const void* B, float beta, void* C,
                 cudaStream_t stream = 0) {
  gemm(ab, c, transA, transB, M, N, K, alpha, A, transA ? M : K, B, transB ? K : N, beta, C, N,
       stream);
}

}  // namespace amor::cuda
