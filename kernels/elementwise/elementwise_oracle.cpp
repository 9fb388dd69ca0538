// PyTorch oracle cases for the elementwise ops with parameters (tests/oracle/elementwise.py).
#include "kernels/elementwise/elementwise.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(elementwise) {
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor x = testing::randn({3, 4, 5}, 21, dt, 3.0), bias = testing::randn({5}, 22, dt);
    Tensor s = testing::randn({5}, 23, dt), dy = testing::randn({3, 4, 5}, 24, dt);
    Tensor dz = testing::randn({3, 4, 5}, 25, dt);
    BiasSoftplusGrads g = bias_softplus_backward(x, bias, dy);
    ChannelScaleGrads c = channel_scale_backward(x, s, dz);
    auto k = w.add_case("elementwise", dtype_name(dt), dt);
    k->input("x", x).input("bias", bias).input("s", s);
    k->output("softplus", bias_softplus_forward(x, bias)).grad_out("softplus", dy);
    k->output("scaled", channel_scale_forward(x, s)).grad_out("scaled", dz);
    // Both outputs depend on x: the gradient of x is the sum of both paths.
    Tensor dx = g.dx.clone();
    add_(dx, c.dx);
    k->grad_in("x", dx).grad_in("bias", g.dbias).grad_in("s", c.ds);
    k->output("silu", silu_forward(x)).output("sigmoid", sigmoid_forward(x));
  }
}
