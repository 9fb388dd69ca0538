// PyTorch oracle cases for RoPE (checked by tests/oracle/rope.py).
#include <string>

#include "kernels/rope/rope.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(rope) {  // w is the OracleWriter
  for (DType dt : {DType::F64, DType::F32}) {
    const std::string suffix = std::string("_") + dtype_name(dt);
    // Position offsets, including a large one (decode deep into a long context), base 10000.
    for (int64_t offset : {int64_t(0), int64_t(5000)}) {
      Tensor x = testing::randn({2, 7, 3, 16}, 71, dt), dy = testing::randn({2, 7, 3, 16}, 72, dt);
      auto c = w.add_case("rope", "offset" + std::to_string(offset) + suffix, dt);
      c->param("position_offset", offset).param("base", 10000.0);
      c->input("x", x);
      c->output("y", rope_forward(x, offset)).grad_out("y", dy);
      c->grad_in("x", rope_backward(dy, offset));
    }
    // Explicit per-sequence positions [B,T] (packed documents) with another base.
    Tensor x = testing::randn({2, 5, 2, 12}, 73, dt), dy = testing::randn({2, 5, 2, 12}, 74, dt);
    Tensor pos =
        Tensor::from_vector<int64_t>({2, 5}, {0, 1, 2, 0, 1, 3000, 3001, 3002, 3003, 3004});
    auto c = w.add_case("rope", "positions" + suffix, dt);
    c->param("base", 500000.0);
    c->input("x", x).input("positions", pos);
    c->output("y", rope_forward_positions(x, pos, 500000.0)).grad_out("y", dy);
    c->grad_in("x", rope_backward_positions(dy, pos, 500000.0));
  }
}
