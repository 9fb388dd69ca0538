#include "kernels/lm_head_loss/lm_head_loss.h"

#include "kernels/core/check.h"
#include "kernels/lm_head_loss/lm_head_loss_blas.h"
#include "kernels/lm_head_loss/lm_head_loss_ref.h"

namespace amor {
namespace {

// h [N,D] and W [V,D] of one float dtype on one device, V >= 2 (log V normalises), D >= 1.
void check_head(const char* op, const Tensor& h, const Tensor& W, int64_t vocab_chunk) {
  check_float_args(op, {{"h", &h}, {"W", &W}});
  check_dim(op, "h", h, 2);
  check_shape(op, "W", W, {kAny, h.size(1)});
  AMOR_CHECK(h.size(1) >= 1, "{}: argument 'h' is {}, expected a hidden size D >= 1", op, h.str());
  AMOR_CHECK(W.size(0) >= 2,
             "{}: argument 'W' is {}, expected a vocabulary of V >= 2 rows (entropy / log V)", op,
             W.str());
  AMOR_CHECK(vocab_chunk >= 1, "{}: vocab_chunk must be >= 1, got {}", op, vocab_chunk);
}

// targets i32 [N] on the cpu, each in [0, V) or the ignore index.
void check_targets(const char* op, const Tensor& targets, int64_t N, int64_t V) {
  check_shape(op, "targets", targets, {N});
  check_dtype(op, "targets", targets, DType::I32);
  AMOR_CHECK(targets.is_cpu(), "{}: argument 'targets' is {}, expected a cpu tensor", op,
             targets.str());
  const int32_t* t = targets.data<int32_t>();
  for (int64_t n = 0; n < N; ++n) {
    AMOR_CHECK(t[n] == ref::kIgnoreIndex || (t[n] >= 0 && t[n] < V),
               "{}: targets[{}] = {} is out of range for a vocabulary of V = {} (expected 0 <= "
               "target < {}, or -100 to ignore)",
               op, n, t[n], V, V);
  }
}

}  // namespace

LmHeadLossOut lm_head_loss_forward(const Tensor& h, const Tensor& W, const Tensor& targets,
                                   int64_t vocab_chunk) {
  const char* op = "lm_head_loss_forward";
  check_head(op, h, W, vocab_chunk);
  if (!h.is_cpu()) fail_no_cuda(op, h);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  check_targets(op, targets, N, V);
  LmHeadLossOut out{Tensor::empty({N}, h.dtype()), Tensor::empty({N}, h.dtype()),
                    Tensor::empty({N}, h.dtype())};
  dispatch_float(op, h, [&](auto tag) {
    using T = decltype(tag);
    cpu::lm_head_loss_forward(h.data<T>(), W.data<T>(), targets.data<int32_t>(), out.loss.data<T>(),
                              out.entropy.data<T>(), out.lse.data<T>(), N, V, D, vocab_chunk,
                              kLmHeadTokenBlock);
  });
  return out;
}

LmHeadLossGrads lm_head_loss_backward(const Tensor& h, const Tensor& W, const Tensor& targets,
                                      const Tensor& lse, const Tensor& dloss, int64_t vocab_chunk) {
  const char* op = "lm_head_loss_backward";
  check_head(op, h, W, vocab_chunk);
  check_float_args(op, {{"h", &h}, {"lse", &lse}, {"dloss", &dloss}});
  if (!h.is_cpu()) fail_no_cuda(op, h);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  check_shape(op, "lse", lse, {N});
  check_shape(op, "dloss", dloss, {N});
  check_targets(op, targets, N, V);
  LmHeadLossGrads g{Tensor::empty({N, D}, h.dtype()), Tensor::empty({V, D}, h.dtype())};
  dispatch_float(op, h, [&](auto tag) {
    using T = decltype(tag);
    cpu::lm_head_loss_backward(h.data<T>(), W.data<T>(), targets.data<int32_t>(), lse.data<T>(),
                               dloss.data<T>(), g.dh.data<T>(), g.dW.data<T>(), N, V, D,
                               vocab_chunk, kLmHeadTokenBlock);
  });
  return g;
}

Tensor lm_head_entropy(const Tensor& h, const Tensor& W, int64_t vocab_chunk) {
  const char* op = "lm_head_entropy";
  check_head(op, h, W, vocab_chunk);
  if (!h.is_cpu()) fail_no_cuda(op, h);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  Tensor entropy = Tensor::empty({N}, h.dtype());
  dispatch_float(op, h, [&](auto tag) {
    using T = decltype(tag);
    cpu::lm_head_loss_forward<T>(h.data<T>(), W.data<T>(), nullptr, nullptr, entropy.data<T>(),
                                 nullptr, N, V, D, vocab_chunk, kLmHeadTokenBlock);
  });
  return entropy;
}

}  // namespace amor
