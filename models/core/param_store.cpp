#include "models/core/param_store.h"

#include "kernels/core/error.h"

namespace amor::model {

InitFn init_normal(double std) {
  return [std](Tensor& t, std::mt19937_64& rng) {
    std::normal_distribution<double> d(0.0, std);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, d(rng));
  };
}

InitFn init_constant(double value) {
  return [value](Tensor& t, std::mt19937_64&) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, value);
  };
}

InitFn init_uniform(double lo, double hi) {
  return [lo, hi](Tensor& t, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_item(i, d(rng));
  };
}

int ParamStore::begin_unit(const std::string& name) {
  units_.push_back(name);
  return static_cast<int>(units_.size()) - 1;
}

Param* ParamStore::add(const std::string& name, const Shape& shape, InitFn init, bool weight_decay) {
  AMOR_CHECK(find(name) == nullptr, "model: parameter '{}' defined twice", name);
  if (units_.empty()) begin_unit("model");
  auto p = std::make_unique<Param>();
  p->name = name;
  p->value = Tensor::zeros(shape, dtype_);
  p->grad = Tensor::zeros(shape, dtype_);
  p->weight_decay = weight_decay;
  p->init = std::move(init);
  p->unit = static_cast<int>(units_.size()) - 1;
  params_.push_back(std::move(p));
  return params_.back().get();
}

void ParamStore::initialize(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& p : params_) {
    p->init(p->value, rng);
    ++p->version;
  }
}

void ParamStore::to(Device device) {
  for (auto& p : params_) {
    p->value = p->value.to(device);
    ++p->version;
  }
}

void ParamStore::zero_grad() {
  for (auto& p : params_) p->grad.zero_();
}

Param* ParamStore::find(const std::string& name) const {
  for (auto& p : params_)
    if (p->name == name) return p.get();
  return nullptr;
}

int64_t ParamStore::numel() const {
  int64_t n = 0;
  for (auto& p : params_) n += p->value.numel();
  return n;
}

}  // namespace amor::model
