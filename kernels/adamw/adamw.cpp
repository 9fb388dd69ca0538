#include "kernels/adamw/adamw.h"

#include "kernels/adamw/adamw_ref.h"
#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/adamw/adamw_cuda.h"
#endif

namespace amor {
namespace {

bool overlap(const Tensor& a, const Tensor& b) {
  auto lo_a = static_cast<const char*>(a.raw_data()), lo_b = static_cast<const char*>(b.raw_data());
  return a.nbytes() > 0 && b.nbytes() > 0 && lo_a < lo_b + b.nbytes() && lo_b < lo_a + a.nbytes();
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay) {
  const char* op = "adamw_step";
  check_defined(op, "param", param);
  if (param.is_cpu()) {
    check_float_args(op, {{"param", &param}, {"grad", &grad}, {"m", &m}, {"v", &v}});
  } else {
    // cuda: f32 master weights and moments, f32 or bf16 gradient (design §2).
    for (auto [name, t] : {std::pair<const char*, const Tensor*>{"param", &param}, {"m", &m},
                           {"v", &v}}) {
      check_on_cuda(op, name, *t);
      check_cuda_dtype(op, name, *t, DType::F32, "f32 master weights and moments");
    }
    check_on_cuda(op, "grad", grad);
    check_cuda_storage(op, "grad", grad);
  }
  check_shape(op, "grad", grad, param.shape());
  check_shape(op, "m", m, param.shape());
  check_shape(op, "v", v, param.shape());
  // The update reads grad after writing param and m, so overlapping memory would corrupt it.
  // (Disjoint slices of one flat buffer, as FSDP hands out, are fine.)
  const std::pair<const char*, const Tensor*> args[] = {
      {"param", &param}, {"grad", &grad}, {"m", &m}, {"v", &v}};
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) {
      AMOR_CHECK(!overlap(*args[i].second, *args[j].second),
                 "adamw_step: arguments '{}' ({}) and '{}' ({}) overlap in memory", args[i].first,
                 args[i].second->str(), args[j].first, args[j].second->str());
    }
  }
  // torch.optim.AdamW's own argument checks.
  AMOR_CHECK(step >= 1, "adamw_step: step is 1-based, got {}", step);
  AMOR_CHECK(lr >= 0, "adamw_step: invalid learning rate {}", lr);
  AMOR_CHECK(eps >= 0, "adamw_step: invalid eps {}", eps);
  AMOR_CHECK(beta1 >= 0 && beta1 < 1, "adamw_step: invalid beta1 {} (expected 0 <= beta1 < 1)",
             beta1);
  AMOR_CHECK(beta2 >= 0 && beta2 < 1, "adamw_step: invalid beta2 {} (expected 0 <= beta2 < 1)",
             beta2);
  AMOR_CHECK(weight_decay >= 0, "adamw_step: invalid weight_decay {}", weight_decay);
  if (!param.is_cpu()) {
    AMOR_ON_CUDA(op, param,
                 cuda::adamw_step(param.data<float>(), grad.dtype(), grad.raw_data(),
                                  m.data<float>(), v.data<float>(), param.numel(), step, lr,
                                  beta1, beta2, eps, weight_decay);
                 return);
  }
  dispatch_float(op, param, [&](auto tag) {
    using T = decltype(tag);
    ref::adamw_step(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), param.numel(), step,
                    lr, beta1, beta2, eps, weight_decay);
  });
}

}  // namespace amor
