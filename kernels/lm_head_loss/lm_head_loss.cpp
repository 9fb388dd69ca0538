#include "kernels/lm_head_loss/lm_head_loss.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/lm_head_loss/lm_head_loss_blas.h"
#include "kernels/lm_head_loss/lm_head_loss_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/lm_head_loss/lm_head_loss_cuda.h"
#endif

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

// On cuda: h (and W) f32 or bf16; targets (if given) i32 [N] on the device, returned as a host
// copy (4 N bytes) for the range check.
Tensor check_cuda_head(const char* op, const Tensor& h, const Tensor* targets) {
  check_cuda_storage(op, "h", h);
  if (!targets) return Tensor();
  check_on_cuda(op, "targets", *targets);
  check_shape(op, "targets", *targets, {h.size(0)});
  check_dtype(op, "targets", *targets, DType::I32);
  return targets->to(Device::CPU);
}

}  // namespace

LmHeadLossOut lm_head_loss_forward(const Tensor& h, const Tensor& W, const Tensor& targets,
                                   int64_t vocab_chunk) {
  const char* op = "lm_head_loss_forward";
  check_head(op, h, W, vocab_chunk);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  if (!h.is_cpu()) {
    const Tensor host_targets = check_cuda_head(op, h, &targets);
    check_cuda_int_range(op, "the vocabulary size V", V);
    check_targets(op, host_targets, N, V);
    AMOR_ON_CUDA(op, h, const Device dev = h.device();
                 LmHeadLossOut out{Tensor::empty({N}, DType::F32, dev),
                                   Tensor::empty({N}, DType::F32, dev),
                                   Tensor::empty({N}, DType::F32, dev)};
                 Tensor scratch = Tensor::empty(
                     {cuda::lm_head_forward_scratch_bytes(N, V, vocab_chunk)}, DType::U8, dev);
                 cuda::lm_head_forward(h.dtype(), h.raw_data(), W.raw_data(),
                                       targets.data<int32_t>(), out.loss.data<float>(),
                                       out.entropy.data<float>(), out.lse.data<float>(), nullptr,
                                       N, V, D, vocab_chunk, scratch.raw_data());
                 return out);
  }
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
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  if (!h.is_cpu()) {
    const Tensor host_targets = check_cuda_head(op, h, &targets);
    check_cuda_int_range(op, "the vocabulary size V", V);
    check_targets(op, host_targets, N, V);
    for (auto [name, t] : {std::pair{"lse", &lse}, std::pair{"dloss", &dloss}}) {
      check_on_cuda(op, name, *t);
      check_cuda_dtype(op, name, *t, DType::F32, "f32 per-token statistics");
      check_shape(op, name, *t, {N});
    }
    AMOR_ON_CUDA(op, h, const Device dev = h.device();
                 LmHeadLossGrads g{Tensor::empty({N, D}, h.dtype(), dev),
                                   Tensor::empty({V, D}, DType::F32, dev)};
                 Tensor scratch = Tensor::empty(
                     {cuda::lm_head_backward_scratch_bytes(h.dtype(), N, V, D, vocab_chunk)},
                     DType::U8, dev);
                 cuda::lm_head_backward(h.dtype(), h.raw_data(), W.raw_data(),
                                        targets.data<int32_t>(), host_targets.data<int32_t>(),
                                        lse.data<float>(), dloss.data<float>(), g.dh.raw_data(),
                                        g.dW.data<float>(), N, V, D, vocab_chunk,
                                        scratch.raw_data());
                 return g);
  }
  check_float_args(op, {{"h", &h}, {"lse", &lse}, {"dloss", &dloss}});
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

int64_t inference_vocab_chunk(int64_t rows, int64_t V, int64_t vocab_chunk) {
  constexpr int64_t kWholeVocabLogits = int64_t(1) << 22;
  AMOR_CHECK(rows >= 0 && V >= 1 && vocab_chunk >= 1,
             "inference_vocab_chunk: rows {}, V {}, vocab_chunk {}", rows, V, vocab_chunk);
  return rows <= kWholeVocabLogits / V ? V : vocab_chunk;
}

Tensor lm_head_entropy(const Tensor& h, const Tensor& W, int64_t vocab_chunk) {
  const char* op = "lm_head_entropy";
  check_head(op, h, W, vocab_chunk);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  if (!h.is_cpu()) {
    check_cuda_head(op, h, nullptr);
    check_cuda_int_range(op, "the vocabulary size V", V);
    AMOR_ON_CUDA(op, h, Tensor entropy = Tensor::empty({N}, DType::F32, h.device());
                 Tensor scratch =
                     Tensor::empty({cuda::lm_head_forward_scratch_bytes(N, V, vocab_chunk)},
                                   DType::U8, h.device());
                 cuda::lm_head_forward(h.dtype(), h.raw_data(), W.raw_data(), nullptr, nullptr,
                                       entropy.data<float>(), nullptr, nullptr, N, V, D,
                                       vocab_chunk, scratch.raw_data());
                 return entropy);
  }
  Tensor entropy = Tensor::empty({N}, h.dtype());
  dispatch_float(op, h, [&](auto tag) {
    using T = decltype(tag);
    cpu::lm_head_loss_forward<T>(h.data<T>(), W.data<T>(), nullptr, nullptr, entropy.data<T>(),
                                 nullptr, N, V, D, vocab_chunk, kLmHeadTokenBlock);
  });
  return entropy;
}

}  // namespace amor
