#include "kernels/lm_head_loss/lm_head_loss_blas.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/core/tensor.h"
#include "kernels/lm_head_loss/lm_head_loss_ref.h"

namespace amor::cpu {
namespace {

// Row-major C[M,N] = alpha op(A) op(B) + beta C.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

// Z[nb, vc] = h[n0:n0+nb] W[c0:c0+vc]^T
template <class T>
void block_logits(const T* h, const T* W, int64_t n0, int64_t nb, int64_t c0, int64_t vc,
                  int64_t D, T* Z) {
  gemm(false, true, nb, vc, D, T(1), h + n0 * D, D, W + c0 * D, D, T(0), Z, vc);
}

}  // namespace

template <class T>
void lm_head_loss_forward(const T* h, const T* W, const int32_t* targets, T* loss, T* entropy_norm,
                          T* lse, int64_t N, int64_t V, int64_t D, int64_t vocab_chunk,
                          int64_t token_block) {
  if (N == 0) return;
  const int64_t tb_max = std::min(token_block, N), vc_max = std::min(vocab_chunk, V);
  Tensor zbuf = Tensor::empty({tb_max, vc_max}, dtype_of<T>);
  T* Z = zbuf.data<T>();
  std::vector<ref::OnlineSoftmax<T>> st(static_cast<size_t>(tb_max));
  std::vector<T> z_target(static_cast<size_t>(tb_max));
  for (int64_t n0 = 0; n0 < N; n0 += token_block) {
    const int64_t nb = std::min(token_block, N - n0);
    std::fill(st.begin(), st.end(), ref::OnlineSoftmax<T>{});
    std::fill(z_target.begin(), z_target.end(), T(0));
    for (int64_t c0 = 0; c0 < V; c0 += vocab_chunk) {
      const int64_t vc = std::min(vocab_chunk, V - c0);
      block_logits(h, W, n0, nb, c0, vc, D, Z);
      for (int64_t i = 0; i < nb; ++i) {
        st[i].add_chunk(Z + i * vc, vc);
        const int64_t target = targets ? targets[n0 + i] : ref::kIgnoreIndex;
        if (target >= c0 && target < c0 + vc) z_target[i] = Z[i * vc + (target - c0)];
      }
    }
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t n = n0 + i;
      const int64_t target = targets ? targets[n] : ref::kIgnoreIndex;
      const T l = st[i].lse();
      if (lse) lse[n] = l;
      if (loss) loss[n] = target == ref::kIgnoreIndex ? T(0) : l - z_target[i];
      entropy_norm[n] = st[i].entropy_norm(V);
    }
  }
}

template <class T>
void lm_head_loss_backward(const T* h, const T* W, const int32_t* targets, const T* lse,
                           const T* dloss, T* dh, T* dW, int64_t N, int64_t V, int64_t D,
                           int64_t vocab_chunk, int64_t token_block) {
  std::fill(dh, dh + N * D, T(0));
  std::fill(dW, dW + V * D, T(0));
  if (N == 0) return;
  const int64_t tb_max = std::min(token_block, N), vc_max = std::min(vocab_chunk, V);
  Tensor zbuf = Tensor::empty({tb_max, vc_max}, dtype_of<T>);
  T* Z = zbuf.data<T>();  // the logits of a block, then overwritten by their gradient dz
  for (int64_t n0 = 0; n0 < N; n0 += token_block) {
    const int64_t nb = std::min(token_block, N - n0);
    bool any = false;
    for (int64_t i = 0; i < nb; ++i) any = any || targets[n0 + i] != ref::kIgnoreIndex;
    if (!any) continue;  // a block of padding contributes nothing
    for (int64_t c0 = 0; c0 < V; c0 += vocab_chunk) {
      const int64_t vc = std::min(vocab_chunk, V - c0);
      block_logits(h, W, n0, nb, c0, vc, D, Z);
      for (int64_t i = 0; i < nb; ++i) {
        const int64_t n = n0 + i, target = targets[n];
        T* row = Z + i * vc;
        if (target == ref::kIgnoreIndex) {
          std::fill(row, row + vc, T(0));
          continue;
        }
        for (int64_t j = 0; j < vc; ++j) row[j] = dloss[n] * std::exp(row[j] - lse[n]);
        if (target >= c0 && target < c0 + vc) row[target - c0] -= dloss[n];
      }
      // dh[block] += dz W[chunk];  dW[chunk] += dz^T h[block]
      gemm(false, false, nb, D, vc, T(1), Z, vc, W + c0 * D, D, T(1), dh + n0 * D, D);
      gemm(true, false, vc, D, nb, T(1), Z, vc, h + n0 * D, D, T(1), dW + c0 * D, D);
    }
  }
}

template void lm_head_loss_forward<float>(const float*, const float*, const int32_t*, float*,
                                          float*, float*, int64_t, int64_t, int64_t, int64_t,
                                          int64_t);
template void lm_head_loss_forward<double>(const double*, const double*, const int32_t*, double*,
                                           double*, double*, int64_t, int64_t, int64_t, int64_t,
                                           int64_t);
template void lm_head_loss_backward<float>(const float*, const float*, const int32_t*, const float*,
                                           const float*, float*, float*, int64_t, int64_t, int64_t,
                                           int64_t, int64_t);
template void lm_head_loss_backward<double>(const double*, const double*, const int32_t*,
                                            const double*, const double*, double*, double*, int64_t,
                                            int64_t, int64_t, int64_t, int64_t);

}  // namespace amor::cpu
