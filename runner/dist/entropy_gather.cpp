// make_entropy_gather: counts all-reduced, entropies padded to the largest count, all-gathered,
// then packed in rank order.
#include "runner/dist/entropy_gather.h"

#include <algorithm>
#include <vector>

#include "kernels/core/error.h"

namespace amor::dist {

model::EntropyGather make_entropy_gather(Communicator& comm) {
  return [&comm](const Tensor& local) -> Tensor {
    AMOR_CHECK(local.defined() && local.is_cpu() &&
                   (local.dtype() == DType::F32 || local.dtype() == DType::F64),
               "amor entropy gather: expected a cpu f32/f64 tensor of entropies, got {}", local.str());
    const int W = comm.size();
    std::vector<int64_t> counts(static_cast<size_t>(W), 0);
    counts[static_cast<size_t>(comm.rank())] = local.numel();
    comm.all_reduce(counts.data(), W, ReduceOp::Sum);
    const int64_t most = *std::max_element(counts.begin(), counts.end());
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    Tensor padded = Tensor::zeros({most}, local.dtype());
    if (local.numel() > 0) padded.slice_flat(0, {local.numel()}).copy_from(local.view({local.numel()}));
    Tensor all = Tensor::empty({most * W}, local.dtype(), comm.device());
    comm.all_gather(padded.to(comm.device()), all);
    Tensor host = all.to(Device::CPU);
    Tensor out = Tensor::empty({total}, local.dtype());
    int64_t at = 0;
    for (int r = 0; r < W; ++r) {
      const int64_t c = counts[static_cast<size_t>(r)];
      if (c > 0) out.slice_flat(at, {c}).copy_from(host.slice_flat(r * most, {c}));
      at += c;
    }
    return out;
  };
}

}  // namespace amor::dist
