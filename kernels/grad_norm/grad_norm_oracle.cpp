// PyTorch oracle cases for grad_norm (checked by tests/oracle/grad_norm.py against
// torch.nn.utils.clip_grad_norm_): one list of gradients that gets clipped, one that does not.
#include "kernels/grad_norm/grad_norm.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(grad_norm) {
  struct Config {
    const char* name;
    double scale, max_norm;
  };
  const Config configs[] = {{"clipped", 1.0, 0.5}, {"unclipped", 0.05, 10.0}};
  for (const Config& cfg : configs) {
    for (DType dt : {DType::F64, DType::F32}) {
      std::vector<Tensor> grads{testing::randn({4, 6}, 61, dt, cfg.scale),
                                testing::randn({11}, 62, dt, cfg.scale),
                                testing::randn({3, 2, 5}, 63, dt, cfg.scale)};
      auto c = w.add_case("grad_norm", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      c->param("max_norm", cfg.max_norm).param("count", int64_t(grads.size()));
      for (size_t k = 0; k < grads.size(); ++k) c->input("g" + std::to_string(k), grads[k].clone());
      const double total = clip_grad_norm(grads, cfg.max_norm);
      for (size_t k = 0; k < grads.size(); ++k) c->output("clipped_g" + std::to_string(k), grads[k]);
      c->output("total_norm", Tensor::full<double>({1}, total).to(dt));
    }
  }
}
