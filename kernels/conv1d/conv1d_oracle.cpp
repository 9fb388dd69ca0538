// PyTorch oracle cases for conv1d (tests/oracle/conv1d.py) and its decode step
// (tests/oracle/conv1d_step.py).
#include <string>

#include "kernels/conv1d/conv1d.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(conv1d) {
  struct Config {
    const char* name;
    int64_t B, T, C, K;
    bool bias, state, silu;
  };
  // "full": everything on; "short": T < K-1 from a zero state, no bias, no activation.
  const Config configs[] = {{"full", 2, 7, 3, 4, true, true, true},
                            {"short", 2, 2, 5, 4, false, false, false}};
  uint64_t seed = 1000;
  for (DType dt : {DType::F64, DType::F32}) {
    for (const Config& cfg : configs) {
      Tensor x = testing::randn({cfg.B, cfg.T, cfg.C}, ++seed, dt);
      Tensor weight = testing::randn({cfg.C, cfg.K}, ++seed, dt, 0.7);
      Tensor bias = cfg.bias ? testing::randn({cfg.C}, ++seed, dt) : Tensor();
      Tensor s0 = cfg.state ? testing::randn({cfg.B, cfg.C, cfg.K - 1}, ++seed, dt) : Tensor();
      Tensor dy = testing::randn({cfg.B, cfg.T, cfg.C}, ++seed, dt);
      Tensor ds1 = testing::randn({cfg.B, cfg.C, cfg.K - 1}, ++seed, dt);
      Conv1dOutput out = conv1d_forward(x, weight, bias, cfg.silu, s0);
      Conv1dGrads g = conv1d_backward(x, weight, bias, cfg.silu, s0, dy, ds1);
      auto c = w.add_case("conv1d", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("silu", cfg.silu);
      c->input("x", x).input("weight", weight);
      c->grad_in("x", g.dx).grad_in("weight", g.dweight);
      if (cfg.bias) c->input("bias", bias).grad_in("bias", g.dbias);
      if (cfg.state) c->input("initial_state", s0).grad_in("initial_state", g.dinitial_state);
      c->output("y", out.y).grad_out("y", dy);
      c->output("final_state", out.final_state).grad_out("final_state", ds1);
    }
  }
}

AMOR_ORACLE(conv1d_step) {
  const int64_t B = 2, C = 5, K = 4;
  uint64_t seed = 2000;
  for (DType dt : {DType::F64, DType::F32}) {
    for (bool silu : {true, false}) {
      Tensor x_t = testing::randn({B, C}, ++seed, dt);
      Tensor state = testing::randn({B, C, K - 1}, ++seed, dt);
      Tensor weight = testing::randn({C, K}, ++seed, dt, 0.7);
      Tensor bias = testing::randn({C}, ++seed, dt);
      auto c = w.add_case("conv1d_step", std::string(silu ? "silu_" : "plain_") + dtype_name(dt),
                          dt);
      c->param("silu", silu);
      c->input("x_t", x_t).input("state", state).input("weight", weight).input("bias", bias);
      Tensor new_state = state.clone();
      c->output("y", conv1d_step(x_t, new_state, weight, bias, silu));
      c->output("new_state", new_state);
    }
  }
}
