#include "kernels/grad_norm/grad_norm.h"

#include <cmath>
#include <string>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/grad_norm/grad_norm_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/grad_norm/grad_norm_cuda.h"
#endif

namespace amor {
namespace {

// Each gradient is a defined float tensor: f32/f64 on the cpu, f32/bf16 on cuda. A list may mix
// devices. Name each by its index in the list.
void check_grads(const char* op, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string name = "grads[" + std::to_string(i) + "]";
    check_float_args(op, {{name.c_str(), &grads[i]}});
    if (!grads[i].is_cpu()) check_cuda_storage(op, name.c_str(), grads[i]);
  }
}

#ifdef AMOR_HAVE_CUDA
// The sums of squares of the cuda tensors of the list, in list order: all launched on one stream
// into device slots, then copied back with one transfer.
std::vector<double> cuda_sums(const std::vector<const Tensor*>& grads) {
  if (grads.empty()) return {};
  const int64_t partials = cuda::sum_of_squares_scratch_doubles();
  const int64_t count = static_cast<int64_t>(grads.size());
  Tensor scratch = Tensor::empty({partials + count}, DType::F64, Device::CUDA);
  double* base = scratch.data<double>();
  for (int64_t k = 0; k < count; ++k) {
    const Tensor& g = *grads[k];
    cuda::sum_of_squares(g.dtype(), g.raw_data(), g.numel(), base, base + partials + k);
  }
  return scratch.slice_flat(partials, {count}).to(Device::CPU).to_vector<double>();
}
#endif

}  // namespace

double sum_of_squares(const std::vector<Tensor>& grads) {
  const char* op = "sum_of_squares";
  check_grads(op, grads);
  // Per-tensor sums (cpu tensors here, cuda tensors on the device), added in list order.
  std::vector<double> per(grads.size(), 0.0);
  std::vector<const Tensor*> on_gpu;
  std::vector<size_t> gpu_index;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.is_cpu()) {
      on_gpu.push_back(&g);
      gpu_index.push_back(i);
      continue;
    }
    dispatch_float(op, g, [&](auto tag) {
      using T = decltype(tag);
      per[i] = ref::sum_of_squares(g.data<T>(), g.numel());
    });
  }
  if (!on_gpu.empty()) {
    AMOR_ON_CUDA(op, *on_gpu.front(), const std::vector<double> sums = cuda_sums(on_gpu);
                 for (size_t k = 0; k < sums.size(); ++k) per[gpu_index[k]] = sums[k]);
  }
  double total = 0;
  for (double s : per) total += s;
  return total;
}

double global_grad_norm(const std::vector<Tensor>& grads) {
  return std::sqrt(sum_of_squares(grads));
}

double clip_coefficient(double total_norm, double max_norm) {
  AMOR_CHECK(max_norm > 0, "clip_coefficient: max_norm must be positive, got {}", max_norm);
  const double coef = max_norm / (total_norm + 1e-6);
  // A NaN norm gives 1 (grads left alone, where torch would multiply them by NaN): the caller
  // sees the NaN norm it gets back and skips the step.
  return coef < 1.0 ? coef : 1.0;
}

void scale_grads(std::vector<Tensor>& grads, double coef) {
  const char* op = "scale_grads";
  check_grads(op, grads);
  for (Tensor& g : grads) {
    if (!g.is_cpu()) {
      AMOR_ON_CUDA(op, g, cuda::scale_inplace(g.dtype(), g.raw_data(), g.numel(), coef));
      continue;
    }
    dispatch_float(op, g, [&](auto tag) {
      using T = decltype(tag);
      ref::scale(g.data<T>(), g.numel(), coef);
    });
  }
}

double clip_grad_norm(std::vector<Tensor>& grads, double max_norm) {
  check_grads("clip_grad_norm", grads);
  AMOR_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got {}", max_norm);
  const double total = global_grad_norm(grads);
  const double coef = clip_coefficient(total, max_norm);
  if (coef < 1.0) scale_grads(grads, coef);
  return total;
}

}  // namespace amor
