// The recurrent mixers' inits keep dt ~ 0.01 and D = norms = 1; gradient checks move these small
// parameters (dt_bias, A_log, D, the norms' weights) to generic values so that every path (the
// scan's state, the skip, the per-channel scales) carries signal.
#pragma once
#include <cstdint>
#include <string>

#include "models/core/param_store.h"
#include "tests/common/random.h"

namespace amor::testing {

inline void randomize_recurrent_params(model::ParamStore& ps, uint64_t seed) {
  for (auto& p : ps.params()) {
    const std::string& n = p->name;
    auto set = [&](const Tensor& t) { p->value.copy_from(t); };
    if (n.ends_with(".dt_bias")) set(randn(p->value.shape(), seed++, DType::F64, 0.7));
    if (n.ends_with(".A_log")) set(uniform(p->value.shape(), seed++, -1.0, 0.7));
    if (n.ends_with(".D") || n.ends_with("norm.weight"))
      set(uniform(p->value.shape(), seed++, 0.5, 1.5));
  }
}

}  // namespace amor::testing
