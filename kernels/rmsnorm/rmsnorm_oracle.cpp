// PyTorch oracle cases for plain RMSNorm (checked by tests/oracle/rmsnorm.py).
#include <string>

#include "kernels/rmsnorm/rmsnorm.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(rmsnorm) {  // w is the OracleWriter
  struct Config {
    const char* name;
    Shape x;
    double eps;
  };
  for (const Config& cfg : {Config{"2d", {6, 37}, 1e-5}, Config{"3d_eps", {2, 3, 8}, 0.25}}) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor x = testing::randn(cfg.x, 41, dt, 1.7);
      Tensor weight = testing::randn({cfg.x.back()}, 42, dt);
      Tensor dy = testing::randn(cfg.x, 43, dt);
      RMSNormOut out = rmsnorm_forward(x, weight, cfg.eps);
      RMSNormGrads g = rmsnorm_backward(x, weight, out.rstd, dy);
      auto c = w.add_case("rmsnorm", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("eps", cfg.eps);
      c->input("x", x).input("w", weight);
      c->output("y", out.y).output("rstd", out.rstd).grad_out("y", dy);
      c->grad_in("x", g.dx).grad_in("w", g.dw);
    }
  }
}
