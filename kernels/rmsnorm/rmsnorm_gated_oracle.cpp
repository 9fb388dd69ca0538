// PyTorch oracle cases for gated, grouped RMSNorm (checked by tests/oracle/rmsnorm_gated.py).
#include <string>

#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(rmsnorm_gated) {  // w is the OracleWriter
  struct Config {
    const char* name;
    Shape x;
    int64_t group;
    double eps;
  };
  // Mamba2-like (several groups) and GDN-like (per head: one group of the head dim) layouts.
  for (const Config& cfg :
       {Config{"groups3", {5, 24}, 8, 1e-5}, Config{"onegroup", {2, 3, 4, 10}, 10, 1e-6}}) {
    for (bool nbg : {false, true}) {
      for (DType dt : {DType::F64, DType::F32}) {
        Tensor x = testing::randn(cfg.x, 51, dt, 1.3), z = testing::randn(cfg.x, 52, dt, 2.0);
        Tensor weight = testing::randn({cfg.x.back()}, 53, dt);
        Tensor dy = testing::randn(cfg.x, 54, dt);
        RMSNormOut out = rmsnorm_gated_forward(x, z, weight, cfg.group, cfg.eps, nbg);
        RMSNormGatedGrads g =
            rmsnorm_gated_backward(x, z, weight, out.rstd, dy, cfg.group, cfg.eps, nbg);
        auto c = w.add_case("rmsnorm_gated",
                            std::string(cfg.name) + (nbg ? "_nbg_" : "_gbn_") + dtype_name(dt), dt);
        c->param("group_size", cfg.group).param("eps", cfg.eps).param("norm_before_gate", nbg);
        c->input("x", x).input("z", z).input("w", weight);
        c->output("y", out.y).output("rstd", out.rstd).grad_out("y", dy);
        c->grad_in("x", g.dx).grad_in("z", g.dz).grad_in("w", g.dw);
      }
    }
  }
}
