// PyTorch oracle cases for adamw (checked by tests/oracle/adamw.py): three steps from zero
// moments on the same initial parameter and gradients as torch.optim.AdamW is given.
#include "kernels/adamw/adamw.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

namespace {

struct Config {
  const char* name;
  double lr, beta1, beta2, eps, weight_decay, grad_scale;
};

}  // namespace

AMOR_ORACLE(adamw) {
  const Config configs[] = {{"lr1e-3_wd0.1", 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0},
                            {"lr5e-2_nowd_smallgrad", 5e-2, 0.8, 0.999, 1e-6, 0.0, 1e-4}};
  for (const Config& cfg : configs) {
    for (DType dt : {DType::F64, DType::F32}) {
      const Shape shape{5, 7};
      Tensor p = testing::randn(shape, 51, dt);
      auto c = w.add_case("adamw", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("lr", cfg.lr).param("beta1", cfg.beta1).param("beta2", cfg.beta2);
      c->param("eps", cfg.eps).param("weight_decay", cfg.weight_decay).param("steps", 3);
      c->input("param", p);
      Tensor param = p.clone(), m = Tensor::zeros(shape, dt), v = Tensor::zeros(shape, dt);
      for (int step = 1; step <= 3; ++step) {
        Tensor g = testing::randn(shape, 51 + step, dt, cfg.grad_scale);
        c->input("grad" + std::to_string(step), g);
        adamw_step(param, g, m, v, step, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay);
      }
      c->output("param", param).output("m", m).output("v", v);
    }
  }
}
