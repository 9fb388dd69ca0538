// PyTorch oracle cases for l2norm (checked by tests/oracle/l2norm.py).
#include <string>

#include "kernels/l2norm/l2norm.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(l2norm) {  // w is the OracleWriter
  struct Config {
    const char* name;
    Shape x;
    double eps;
  };
  // Per-head q/k layout [B,T,H,Dh], and a small-norm case where eps matters.
  for (const Config& cfg : {Config{"heads", {2, 5, 3, 16}, 1e-6}, Config{"eps", {7, 9}, 0.3}}) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor x = testing::randn(cfg.x, 61, dt, cfg.eps > 0.1 ? 0.2 : 1.0);
      Tensor dy = testing::randn(cfg.x, 62, dt);
      L2NormOut out = l2norm_forward(x, cfg.eps);
      auto c = w.add_case("l2norm", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("eps", cfg.eps);
      c->input("x", x);
      c->output("y", out.y).output("rstd", out.rstd).grad_out("y", dy);
      c->grad_in("x", l2norm_backward(x, out.rstd, dy));
    }
  }
}
