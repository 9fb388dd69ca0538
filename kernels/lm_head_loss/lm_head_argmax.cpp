#include "kernels/lm_head_loss/lm_head_argmax.h"

#include <algorithm>
#include <set>
#include <vector>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/linear/gemm_cpu.h"
#include "kernels/lm_head_loss/lm_head_loss.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/lm_head_loss/lm_head_loss_cuda.h"
#endif

namespace amor {

ArgmaxExclusion::ArgmaxExclusion(std::span<const int32_t> excluded, int64_t vocab, Device dev)
    : V(vocab), device(dev) {
  const char* op = "lm_head_argmax";
  const std::set<int32_t> banned(excluded.begin(), excluded.end());
  for (int32_t id : banned)
    AMOR_CHECK(id >= 0 && id < V, "{}: excluded id {} is outside the vocabulary [0, {})", op, id, V);
  AMOR_CHECK(static_cast<int64_t>(banned.size()) < V || V == 0,
             "{}: all {} ids of the vocabulary are excluded", op, V);
  ids.assign(banned.begin(), banned.end());
  if (!ids.empty() && device != Device::CPU)
    device_ids = Tensor::from_vector<int32_t>({static_cast<int64_t>(ids.size())}, ids).to(device);
}

Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk,
                      std::span<const int32_t> excluded) {
  if (excluded.empty()) return lm_head_argmax(h, W, vocab_chunk, ArgmaxExclusion());
  check_float_args("lm_head_argmax", {{"h", &h}, {"W", &W}});  // before W's rows are read
  const int64_t V = W.size(0);
  return lm_head_argmax(h, W, vocab_chunk, ArgmaxExclusion(excluded, V, h.device()));
}

Tensor lm_head_argmax(const Tensor& h, const Tensor& W, int64_t vocab_chunk,
                      const ArgmaxExclusion& excluded) {
  const char* op = "lm_head_argmax";
  check_float_args(op, {{"h", &h}, {"W", &W}});
  check_dim(op, "h", h, 2);
  check_shape(op, "W", W, {kAny, h.size(1)});
  AMOR_CHECK(vocab_chunk >= 1, "{}: vocab_chunk must be >= 1, got {}", op, vocab_chunk);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  const std::vector<int32_t>& banned = excluded.ids;  // sorted, unique, in [0, V)
  if (!banned.empty()) {
    AMOR_CHECK(excluded.V == V, "{}: the exclusion was made for a vocabulary of {} ids, W has {}",
               op, excluded.V, V);
    AMOR_CHECK(excluded.device == h.device(), "{}: the exclusion was made for {}, h is {}", op,
               device_name(excluded.device), h.str());
  }
  if (!h.is_cpu()) {
    // The forward's online max over vocabulary chunks, with only the argmax written.
    check_cuda_storage(op, "h", h);
    check_cuda_int_range(op, "the vocabulary size V", V);
    AMOR_CHECK(V >= 1, "{}: argument 'W' is {}, expected at least one row", op, W.str());
    AMOR_ON_CUDA(op, h, Tensor out = Tensor::empty({N}, DType::I32, h.device());
                 Tensor scratch =
                     Tensor::empty({cuda::lm_head_forward_scratch_bytes(N, V, vocab_chunk)},
                                   DType::U8, h.device());
                 if (banned.empty()) {
                   cuda::lm_head_forward(h.dtype(), h.raw_data(), W.raw_data(), nullptr, nullptr,
                                         nullptr, nullptr, out.data<int32_t>(), N, V, D,
                                         vocab_chunk, scratch.raw_data());
                 } else {
                   cuda::lm_head_argmax_excluding(h.dtype(), h.raw_data(), W.raw_data(),
                                                  out.data<int32_t>(), N, V, D, vocab_chunk,
                                                  excluded.device_ids.data<int32_t>(),
                                                  excluded.device_ids.numel(), scratch.raw_data());
                 }
                 return out);
  }
  Tensor out = Tensor::empty({N}, DType::I32);
  dispatch_float(op, h, [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = std::min(vocab_chunk, V);
    std::vector<T> best(static_cast<size_t>(N), T(0));
    std::vector<char> have(static_cast<size_t>(N), 0);  // a candidate was seen for the row
    std::vector<T> logits(static_cast<size_t>(N * C));
    int32_t* arg = out.data<int32_t>();
    for (int64_t v0 = 0; v0 < V; v0 += C) {
      const int64_t c = std::min(C, V - v0);
      // logits[N, c] = h [N,D] x W[v0:v0+c]^T
      gemm_cpu<T>(false, true, N, c, D, T(1), h.data<T>(), W.data<T>() + v0 * D, T(0), logits.data());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < c; ++j) {
          if (!banned.empty() &&
              std::binary_search(banned.begin(), banned.end(), static_cast<int32_t>(v0 + j)))
            continue;
          T z = logits[static_cast<size_t>(n * c + j)];
          if (!have[static_cast<size_t>(n)] || z > best[static_cast<size_t>(n)]) {  // strict: first max wins
            best[static_cast<size_t>(n)] = z;
            arg[n] = static_cast<int32_t>(v0 + j);
            have[static_cast<size_t>(n)] = 1;
          }
        }
    }
  });
  return out;
}

LmHeadDecodeOut lm_head_decode(const Tensor& h, const Tensor& W, int64_t vocab_chunk) {
  const char* op = "lm_head_decode";
  if (h.is_cpu()) {  // the two passes of the cpu reference
    Tensor ignore = Tensor::full<int32_t>({h.size(0)}, -100);
    return {lm_head_loss_forward(h, W, ignore, vocab_chunk).entropy,
            lm_head_argmax(h, W, vocab_chunk)};
  }
  check_float_args(op, {{"h", &h}, {"W", &W}});
  check_dim(op, "h", h, 2);
  check_shape(op, "W", W, {kAny, h.size(1)});
  AMOR_CHECK(vocab_chunk >= 1, "{}: vocab_chunk must be >= 1, got {}", op, vocab_chunk);
  const int64_t N = h.size(0), D = h.size(1), V = W.size(0);
  AMOR_CHECK(V >= 2, "{}: argument 'W' is {}, expected a vocabulary of V >= 2 rows (entropy / log V)",
             op, W.str());
  check_cuda_storage(op, "h", h);
  check_cuda_int_range(op, "the vocabulary size V", V);
  AMOR_ON_CUDA(op, h, LmHeadDecodeOut out{Tensor::empty({N}, DType::F32, h.device()),
                                          Tensor::empty({N}, DType::I32, h.device())};
               Tensor scratch =
                   Tensor::empty({cuda::lm_head_forward_scratch_bytes(N, V, vocab_chunk)},
                                 DType::U8, h.device());
               cuda::lm_head_forward(h.dtype(), h.raw_data(), W.raw_data(), nullptr, nullptr,
                                     out.entropy.data<float>(), nullptr,
                                     out.argmax.data<int32_t>(), N, V, D, vocab_chunk,
                                     scratch.raw_data());
               return out);
}

}  // namespace amor
