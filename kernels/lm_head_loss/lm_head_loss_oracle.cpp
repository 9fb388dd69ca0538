// PyTorch oracle cases for lm_head_loss and lm_head_entropy (checked by
// tests/oracle/lm_head_loss.py and tests/oracle/lm_head_entropy.py).
#include "kernels/lm_head_loss/lm_head_loss.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

namespace {

struct Config {
  const char* name;
  int64_t N, D, V, chunk;
  double h_scale;  // larger: more peaked softmax
};

}  // namespace

AMOR_ORACLE(lm_head_loss) {
  const Config configs[] = {{"v37_chunk8", 9, 12, 37, 8, 1.0}, {"v50_chunk16_peaked", 7, 6, 50, 16, 4.0}};
  for (const Config& cfg : configs) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor h = testing::randn({cfg.N, cfg.D}, 41, dt, cfg.h_scale);
      Tensor W = testing::randn({cfg.V, cfg.D}, 42, dt);
      Tensor targets = testing::randint({cfg.N}, 43, cfg.V);
      targets.data<int32_t>()[1] = -100;
      targets.data<int32_t>()[cfg.N - 2] = -100;
      Tensor dloss = testing::randn({cfg.N}, 44, dt);
      LmHeadLossOut f = lm_head_loss_forward(h, W, targets, cfg.chunk);
      LmHeadLossGrads g = lm_head_loss_backward(h, W, targets, f.lse, dloss, cfg.chunk);
      auto c = w.add_case("lm_head_loss", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("vocab_chunk", cfg.chunk);
      c->input("h", h).input("W", W).input("targets", targets);
      c->output("loss", f.loss).output("entropy", f.entropy).output("lse", f.lse);
      c->grad_out("loss", dloss);
      c->grad_in("h", g.dh).grad_in("W", g.dW);
    }
  }
}

AMOR_ORACLE(lm_head_entropy) {
  const Config configs[] = {{"v37_chunk8", 9, 12, 37, 8, 1.0}, {"v50_chunk7_peaked", 7, 6, 50, 7, 4.0}};
  for (const Config& cfg : configs) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor h = testing::randn({cfg.N, cfg.D}, 45, dt, cfg.h_scale);
      Tensor W = testing::randn({cfg.V, cfg.D}, 46, dt);
      auto c = w.add_case("lm_head_entropy", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("vocab_chunk", cfg.chunk);
      c->input("h", h).input("W", W);
      c->output("entropy", lm_head_entropy(h, W, cfg.chunk));
    }
  }
}
