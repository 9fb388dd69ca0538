// PyTorch oracle cases for the SSD scan and its decode step (checked by tests/oracle/ssd.py).
#include <string>

#include "kernels/ssd/ssd.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

namespace {

struct Config {
  const char* name;
  int64_t batch, T, H, P, G, N, chunk;
  bool with_h0, with_dfinal;
};

}  // namespace

AMOR_ORACLE(ssd) {
  const Config configs[] = {
      {"chunk4_g2_h0", 2, 13, 4, 3, 2, 5, 4, true, true},
      {"chunk5_g1", 1, 11, 4, 4, 1, 6, 5, false, true},
      {"recurrent_g1_h0", 2, 7, 2, 3, 1, 4, 0, true, false},
  };
  uint64_t seed = 2000;
  for (DType dt : {DType::F64, DType::F32}) {
    for (const Config& c : configs) {
      seed += 20;
      Tensor x = testing::randn({c.batch, c.T, c.H, c.P}, seed + 1, dt);
      Tensor dts = testing::uniform({c.batch, c.T, c.H}, seed + 2, 0.05, 0.8, dt);
      Tensor A = testing::uniform({c.H}, seed + 3, -1.5, -0.2, dt);
      Tensor B = testing::randn({c.batch, c.T, c.G, c.N}, seed + 4, dt);
      Tensor C = testing::randn({c.batch, c.T, c.G, c.N}, seed + 5, dt);
      Tensor D = testing::randn({c.H}, seed + 6, dt);
      Tensor h0 = c.with_h0 ? testing::randn({c.batch, c.H, c.P, c.N}, seed + 7, dt) : Tensor();
      Tensor dy = testing::randn({c.batch, c.T, c.H, c.P}, seed + 8, dt);
      Tensor dS = c.with_dfinal ? testing::randn({c.batch, c.H, c.P, c.N}, seed + 9, dt) : Tensor();
      SsdOut o = ssd_forward(x, dts, A, B, C, D, h0, c.chunk);
      SsdGrads g = ssd_backward(x, dts, A, B, C, D, h0, dy, dS, c.chunk);
      auto k = w.add_case("ssd", std::string(c.name) + "_" + dtype_name(dt), dt);
      k->param("chunk_size", c.chunk).param("step", false);
      k->input("x", x).input("dt", dts).input("A", A).input("B", B).input("C", C).input("D", D);
      k->output("y", o.y).output("final_state", o.final_state).grad_out("y", dy);
      k->grad_in("x", g.dx).grad_in("dt", g.ddt).grad_in("A", g.dA).grad_in("B", g.dB);
      k->grad_in("C", g.dC).grad_in("D", g.dD);
      if (c.with_h0) k->input("initial_state", h0).grad_in("initial_state", g.dinitial_state);
      if (c.with_dfinal) k->grad_out("final_state", dS);
    }
    // One decode step: the state it is handed and the state it leaves are both checked.
    Tensor x = testing::randn({2, 4, 3}, 2101, dt), dts = testing::uniform({2, 4}, 2102, 0.05, 0.8, dt);
    Tensor A = testing::uniform({4}, 2103, -1.5, -0.2, dt), D = testing::randn({4}, 2106, dt);
    Tensor B = testing::randn({2, 2, 5}, 2104, dt), C = testing::randn({2, 2, 5}, 2105, dt);
    Tensor state = testing::randn({2, 4, 3, 5}, 2107, dt);
    Tensor before = state.clone();
    Tensor y = ssd_step(x, dts, A, B, C, D, state);
    auto k = w.add_case("ssd", std::string("step_") + dtype_name(dt), dt);
    k->param("step", true);
    k->input("x", x).input("dt", dts).input("A", A).input("B", B).input("C", C).input("D", D);
    k->input("initial_state", before).output("y", y).output("final_state", state);
  }
}
