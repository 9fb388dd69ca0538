// gather_flat: counts all-reduced, values padded to the largest count, all-gathered on the
// communicator's device, then packed in rank order on the values' device.
#include "runner/dist/run_group.h"

#include <algorithm>
#include <vector>

#include "kernels/core/error.h"

namespace amor::dist {

Tensor gather_flat(Communicator& comm, const Tensor& local) {
  AMOR_CHECK(local.defined() && (local.dtype() == DType::F32 || local.dtype() == DType::F64),
             "gather_flat: expected an f32/f64 tensor, got {}",
             local.defined() ? local.str() : std::string("an undefined tensor"));
  const int W = comm.size();
  const Tensor flat = local.view({local.numel()});
  // One rank: its values are the run's (no collective, nothing leaves the device).
  if (W == 1) return flat;
  // The counts go through the host (the sizes of the collective below): a few bytes. The
  // values themselves stay on comm.device() (the GPU under NCCL) from here on.
  std::vector<int64_t> counts(static_cast<size_t>(W), 0);
  counts[static_cast<size_t>(comm.rank())] = local.numel();
  comm.all_reduce(counts.data(), W, ReduceOp::Sum);
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const Device dev = comm.device();
  Tensor mine = flat.to(dev);
  Tensor padded = mine;
  if (local.numel() < most) {
    padded = Tensor::zeros({most}, local.dtype(), dev);
    if (local.numel() > 0) padded.slice_flat(0, {local.numel()}).copy_from(mine);
  }
  Tensor all = Tensor::empty({most * W}, local.dtype(), dev);
  comm.all_gather(padded, all);
  Tensor out = all;
  if (total != most * W) {  // ragged: drop each rank's padding (device-to-device copies)
    out = Tensor::empty({total}, local.dtype(), dev);
    int64_t at = 0;
    for (int r = 0; r < W; ++r) {
      const int64_t c = counts[static_cast<size_t>(r)];
      if (c > 0) out.slice_flat(at, {c}).copy_from(all.slice_flat(r * most, {c}));
      at += c;
    }
  }
  return out.to(local.device());
}

void CommRunGroup::sum(std::vector<double>& values) {
  if (!values.empty()) comm_.all_reduce(values.data(), static_cast<int64_t>(values.size()), ReduceOp::Sum);
}

}  // namespace amor::dist
