// PyTorch oracle cases for embedding (checked by tests/oracle/embedding.py).
#include <string>

#include "kernels/embedding/embedding.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(embedding) {  // w is the OracleWriter
  struct Config {
    const char* name;
    Shape ids;
    int64_t vocab, d;
  };
  // "repeats": far more ids than rows, so dW accumulates; "batched": ids [B,T] -> y [B,T,D].
  for (const Config& cfg : {Config{"repeats", {40}, 7, 5}, Config{"batched", {3, 6}, 29, 12}}) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor ids = testing::randint(cfg.ids, 31, cfg.vocab);
      Tensor weight = testing::randn({cfg.vocab, cfg.d}, 32, dt);
      Shape y_shape = cfg.ids;
      y_shape.push_back(cfg.d);
      Tensor dy = testing::randn(y_shape, 33, dt);
      auto c = w.add_case("embedding", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->input("ids", ids).input("weight", weight);
      c->output("y", embedding_forward(ids, weight)).grad_out("y", dy);
      c->grad_in("weight", embedding_backward(ids, dy, cfg.vocab));
    }
  }
}
