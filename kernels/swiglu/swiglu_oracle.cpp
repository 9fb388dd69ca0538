// PyTorch oracle cases for swiglu (checked by tests/oracle/swiglu.py).
#include "kernels/swiglu/swiglu.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(swiglu) {
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor g = testing::randn({4, 33}, 11, dt, 2.0), u = testing::randn({4, 33}, 12, dt);
    Tensor dh = testing::randn({4, 33}, 13, dt);
    SwigluGrads gr = swiglu_backward(g, u, dh);
    auto c = w.add_case("swiglu", dtype_name(dt), dt);
    c->input("g", g).input("u", u);
    c->output("h", swiglu_forward(g, u)).grad_out("h", dh);
    c->grad_in("g", gr.dg).grad_in("u", gr.du);
  }
}
