#include "runner/train/step_tensors.h"

#include "data/synthetic/token_task.h"

namespace amor {

Tensor host(const Tensor& t) { return t.defined() && !t.is_cpu() ? t.to(Device::CPU) : t; }


model::Batch on_device(model::Batch b, Device dev) {
  if (dev == Device::CPU) return b;
  b.tokens = b.tokens.to(dev);
  b.targets = b.targets.to(dev);
  return b;
}

Tensor loss_weights(const Tensor& targets, double global_valid, DType dtype) {
  Tensor w = Tensor::zeros(targets.shape(), dtype);
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i)
    if (t[i] != synthetic::kIgnore) w.set_item(i, 1.0 / global_valid);
  return w;
}

int64_t count_valid(const Tensor& targets) {
  int64_t n = 0;
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i) n += t[i] != synthetic::kIgnore;
  return n;
}

}  // namespace amor
