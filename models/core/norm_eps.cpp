#include "models/core/norm_eps.h"

#include <string>

#include "kernels/core/error.h"

namespace amor::model {

namespace {

// A per-location key: > 0 is its own value, 0 falls back to model.norm_eps.
double own_or_default(double own, const char* key, double fallback) {
  AMOR_CHECK(own >= 0, "{} is {}, expected > 0 (or 0: model.norm_eps)", key, own);
  return own > 0 ? own : fallback;
}

}  // namespace

NormEps norm_eps_of(const ModelConfig& c) {
  AMOR_CHECK(c.norm_eps > 0, "model.norm_eps is {}, expected > 0", c.norm_eps);
  AMOR_CHECK(c.gdn.norm_eps > 0, "model.gdn.norm_eps is {}, expected > 0", c.gdn.norm_eps);
  NormEps e;
  e.mixer = own_or_default(c.mixer_norm_eps, "model.mixer_norm_eps", c.norm_eps);
  e.mlp = own_or_default(c.mlp_norm_eps, "model.mlp_norm_eps", c.norm_eps);
  e.norm_f = own_or_default(c.norm_f_eps, "model.norm_f_eps", c.norm_eps);
  e.amor = own_or_default(c.amor.norm_eps, "model.amor.norm_eps", c.norm_eps);
  e.mamba2 = own_or_default(c.mamba2.norm_eps, "model.mamba2.norm_eps", c.norm_eps);
  e.gdn = c.gdn.norm_eps;
  e.other = c.norm_eps;
  return e;
}

}  // namespace amor::model
