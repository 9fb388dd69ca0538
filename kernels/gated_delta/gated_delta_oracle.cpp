// PyTorch oracle cases for the gated delta rule (checked by tests/oracle/gated_delta.py, a
// step-by-step torch recurrence): the chunked algorithm and the recurrence, with and without an
// initial state and a final-state gradient, in f64 and f32.
#include "kernels/gated_delta/gated_delta.h"
#include "kernels/gated_delta/gated_delta_testing.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

namespace {

struct Config {
  const char* name;
  int64_t B, T, H, K, V, chunk;
  bool with_state;
};

}  // namespace

AMOR_ORACLE(gated_delta) {
  const Config configs[] = {
      {"chunk5_state", 2, 13, 2, 4, 6, 5, true},
      {"recurrence_state", 1, 9, 3, 8, 5, 0, true},
      {"chunk64_nostate", 2, 7, 2, 6, 4, 64, false},
      {"chunk16_long", 1, 40, 2, 8, 8, 16, true},
  };
  uint64_t seed = 2000;
  for (const Config& cf : configs) {
    for (DType dt : {DType::F64, DType::F32}) {
      seed += 20;
      testing::GatedDeltaInputs x =
          testing::gated_delta_inputs(cf.B, cf.T, cf.H, cf.K, cf.V, cf.with_state, seed, dt);
      const double scale = gated_delta_default_scale(cf.K);
      Tensor wo = testing::randn({cf.B, cf.T, cf.H, cf.V}, seed + 10, dt);
      Tensor ws =
          cf.with_state ? testing::randn({cf.B, cf.H, cf.K, cf.V}, seed + 11, dt) : Tensor();
      GatedDeltaOut out = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, cf.chunk);
      GatedDeltaGrads gr =
          gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, wo, ws, cf.chunk);
      auto c = w.add_case("gated_delta", std::string(cf.name) + "_" + dtype_name(dt), dt);
      c->param("scale", scale).param("chunk_size", cf.chunk);
      c->input("q", x.q).input("k", x.k).input("v", x.v).input("g", x.g).input("beta", x.beta);
      c->output("o", out.o).output("final_state", out.final_state).grad_out("o", wo);
      c->grad_in("q", gr.dq).grad_in("k", gr.dk).grad_in("v", gr.dv).grad_in("g", gr.dg);
      c->grad_in("beta", gr.dbeta);
      if (cf.with_state) {
        c->input("initial_state", x.s0).grad_out("final_state", ws);
        c->grad_in("initial_state", gr.dinitial_state);
      }
    }
  }
}
