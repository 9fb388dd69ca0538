// Linear layer without bias, in PyTorch's weight convention (W is [out, in]):
//
//   y[n,o]  = sum_i x[n,i] W[o,i]                 (y = x W^T,  x [N,in], y [N,out])
//   dx[n,i] = sum_o dy[n,o] W[o,i]                (dx = dy W)
//   dW[o,i] = sum_n dy[n,o] x[n,i]                (dW = dy^T x)
//
// These are the plain triple loops the BLAS path (gemm_cpu.h, used by linear.cpp) is tested
// against; sums accumulate in double so the float version is a trustworthy reference too.
// ref::gemm is the loop version of gemm_cpu, with the same row-major/leading-dimension convention:
//   C[m,n] = alpha * sum_k op(A)[m,k] op(B)[k,n] + beta * C[m,n]   (C not read when beta == 0).
#pragma once
#include <cstdint>

namespace amor::ref {

template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = transA ? A[k * lda + m] : A[m * lda + k];
        double b = transB ? B[n * ldb + k] : B[k * ldb + n];
        acc += a * b;
      }
      double c = beta == T(0) ? 0.0 : double(beta) * C[m * ldc + n];
      C[m * ldc + n] = static_cast<T>(double(alpha) * acc + c);
    }
  }
}

template <class T>
void linear_forward(const T* x, const T* w, T* y, int64_t n_rows, int64_t in, int64_t out) {
  for (int64_t n = 0; n < n_rows; ++n) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i) acc += double(x[n * in + i]) * w[o * in + i];
      y[n * out + o] = static_cast<T>(acc);
    }
  }
}

// dx may be nullptr (the input needs no gradient, e.g. the first layer's input is an embedding
// whose gradient is taken elsewhere).
template <class T>
void linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t n_rows, int64_t in,
                     int64_t out) {
  if (dx) {
    for (int64_t n = 0; n < n_rows; ++n) {
      for (int64_t i = 0; i < in; ++i) {
        double acc = 0;
        for (int64_t o = 0; o < out; ++o) acc += double(dy[n * out + o]) * w[o * in + i];
        dx[n * in + i] = static_cast<T>(acc);
      }
    }
  }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0;
      for (int64_t n = 0; n < n_rows; ++n) acc += double(dy[n * out + o]) * x[n * in + i];
      dw[o * in + i] = static_cast<T>(acc);
    }
  }
}

}  // namespace amor::ref
