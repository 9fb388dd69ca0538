#include "kernels/lm_head_loss/lm_head_argmax.h"

#include <algorithm>
#include <vector>

#include "kernels/core/check.h"
#include "kernels/linear/gemm_cpu.h"

namespace amor {

Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk) {
  const char* op = "lm_head_argmax";
  check_float_args(op, {{"h", &h}, {"W", &W}});
  check_dim(op, "h", h, 2);
  check_shape(op, "W", W, {kAny, h.size(1)});
  AMOR_CHECK(vocab_chunk >= 1, "{}: vocab_chunk must be >= 1, got {}", op, vocab_chunk);
  if (!h.is_cpu()) fail_no_cuda(op, h);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  Tensor out = Tensor::empty({N}, DType::I32);
  dispatch_float(op, h, [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = std::min(vocab_chunk, V);
    std::vector<T> best(static_cast<size_t>(N), T(0));
    std::vector<T> logits(static_cast<size_t>(N * C));
    int32_t* arg = out.data<int32_t>();
    for (int64_t v0 = 0; v0 < V; v0 += C) {
      const int64_t c = std::min(C, V - v0);
      // logits[N, c] = h [N,D] x W[v0:v0+c]^T
      gemm_cpu<T>(false, true, N, c, D, T(1), h.data<T>(), W.data<T>() + v0 * D, T(0), logits.data());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < c; ++j) {
          T z = logits[static_cast<size_t>(n * c + j)];
          if ((v0 == 0 && j == 0) || z > best[static_cast<size_t>(n)]) {  // strict: first max wins
            best[static_cast<size_t>(n)] = z;
            arg[n] = static_cast<int32_t>(v0 + j);
          }
        }
    }
  });
  return out;
}

}  // namespace amor
