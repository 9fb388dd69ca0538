#include "kernels/grad_norm/grad_norm.h"

#include <cmath>
#include <string>

#include "kernels/core/check.h"
#include "kernels/grad_norm/grad_norm_ref.h"

namespace amor {
namespace {

// Each gradient is a defined f32/f64 cpu tensor; name it by its index in the list.
void check_grads(const char* op, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string name = "grads[" + std::to_string(i) + "]";
    check_float_args(op, {{name.c_str(), &grads[i]}});
    if (!grads[i].is_cpu()) fail_no_cuda(op, grads[i]);
  }
}

}  // namespace

double sum_of_squares(const std::vector<Tensor>& grads) {
  const char* op = "sum_of_squares";
  check_grads(op, grads);
  double total = 0;
  for (const Tensor& g : grads) {
    dispatch_float(op, g, [&](auto tag) {
      using T = decltype(tag);
      total += ref::sum_of_squares(g.data<T>(), g.numel());
    });
  }
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
