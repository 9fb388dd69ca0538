// Every trainable tensor of a model, in one ordered list with its safetensors name, its gradient,
// whether weight decay applies, how it is initialised, and which block ("unit") owns it.
//
// Units are what FSDP shards and gathers as one flat buffer (design §4): the embedding/head is
// one unit, each layer or AMOR block another. Modules keep Param* pointers; FSDP may later point
// a Param's value at a view into a gathered flat buffer without the modules noticing.
#pragma once
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::model {

// Fills a freshly allocated tensor (CPU, the model's dtype) from the model's RNG.
using InitFn = std::function<void(Tensor&, std::mt19937_64&)>;
InitFn init_normal(double std);
InitFn init_constant(double value);
InitFn init_uniform(double lo, double hi);

struct Param {
  std::string name;
  Tensor value;
  Tensor grad;
  bool weight_decay = true;
  InitFn init;
  int unit = 0;
  // Counts changes of value: whatever writes into value or replaces it increments it (initialize,
  // a weights load, the optimizer step, FSDP's gathered views, a move to another device). What a
  // module derives from a parameter and keeps between calls is keyed on it (AmorBlock's alpha at
  // inference: design §2's bitwise decode depends on it), so a write must not skip it.
  uint64_t version = 0;
};

class ParamStore {
 public:
  explicit ParamStore(DType dtype) : dtype_(dtype) {}
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Starts a new unit; parameters added after belong to it. Returns its index.
  int begin_unit(const std::string& name);
  Param* add(const std::string& name, const Shape& shape, InitFn init, bool weight_decay);

  // Runs every parameter's init in order from one RNG seeded with seed: same seed, same model.
  void initialize(uint64_t seed);
  void zero_grad();
  // Moves every parameter's value to `device` (a write: each version is incremented).
  void to(Device device);

  DType dtype() const { return dtype_; }
  const std::vector<std::unique_ptr<Param>>& params() const { return params_; }
  Param* find(const std::string& name) const;
  const std::vector<std::string>& unit_names() const { return units_; }
  int64_t numel() const;

 private:
  DType dtype_;
  std::vector<std::unique_ptr<Param>> params_;
  std::vector<std::string> units_;
};

}  // namespace amor::model
