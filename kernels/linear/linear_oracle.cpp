// PyTorch oracle cases for linear (checked by tests/oracle/linear.py).
#include <string>

#include "kernels/linear/linear.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(linear) {  // w is the OracleWriter
  struct Config {
    const char* name;
    Shape x;
    int64_t out;
  };
  for (const Config& cfg : {Config{"2d", {9, 13}, 6}, Config{"3d", {2, 5, 17}, 11}}) {
    for (DType dt : {DType::F64, DType::F32}) {
      Shape y_shape = cfg.x;
      y_shape.back() = cfg.out;
      Tensor x = testing::randn(cfg.x, 21, dt);
      Tensor weight = testing::randn({cfg.out, cfg.x.back()}, 22, dt, 0.3);
      Tensor dy = testing::randn(y_shape, 23, dt);
      LinearGrads g = linear_backward(x, weight, dy);
      auto c = w.add_case("linear", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->input("x", x).input("w", weight);
      c->output("y", linear_forward(x, weight)).grad_out("y", dy);
      c->grad_in("x", g.dx).grad_in("w", g.dw);
    }
  }
}
