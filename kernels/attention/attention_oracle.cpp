// PyTorch oracle cases for attention (checked by tests/oracle/attention.py).
#include <optional>
#include <string>

#include "kernels/attention/attention.h"
#include "tests/common/oracle.h"
#include "tests/common/random.h"

using namespace amor;

AMOR_ORACLE(attention) {
  struct Config {
    const char* name;
    int64_t B, Tq, Tk, H, Hkv, D;
    bool gated;
    std::optional<double> scale;
  };
  const Config configs[] = {
      {"causal_mha", 2, 7, 7, 3, 3, 8, false, std::nullopt},  // default scale 1/sqrt(D)
      {"gated_gqa_suffix", 2, 5, 9, 4, 2, 6, true, 0.3},      // Tq < Tk, GQA, gate
      {"decode_gated_mqa", 3, 1, 6, 4, 1, 5, true, std::nullopt},
  };
  uint64_t seed = 3000;
  for (DType dt : {DType::F64, DType::F32}) {
    for (const Config& cfg : configs) {
      Tensor q = testing::randn({cfg.B, cfg.Tq, cfg.H, cfg.D}, ++seed, dt);
      Tensor k = testing::randn({cfg.B, cfg.Tk, cfg.Hkv, cfg.D}, ++seed, dt);
      Tensor v = testing::randn({cfg.B, cfg.Tk, cfg.Hkv, cfg.D}, ++seed, dt);
      Tensor dout = testing::randn(q.shape(), ++seed, dt);
      Tensor gate;
      if (cfg.gated) {
        gate = testing::bernoulli({cfg.B, cfg.Tq}, ++seed, 0.6);
        gate.data<uint8_t>()[0] = 0;  // at least one row of each kind
        gate.data<uint8_t>()[gate.numel() - 1] = 1;
      }
      AttentionOutput out = attention_forward(q, k, v, gate, cfg.scale);
      AttentionGrads g = attention_backward(q, k, v, gate, out.o, out.lse, dout, cfg.scale);
      auto c = w.add_case("attention", std::string(cfg.name) + "_" + dtype_name(dt), dt);
      if (cfg.scale) c->param("scale", *cfg.scale);
      c->input("q", q).input("k", k).input("v", v);
      if (cfg.gated) c->input("gate", gate);
      c->output("o", out.o).grad_out("o", dout).output("lse", out.lse);
      c->grad_in("q", g.dq).grad_in("k", g.dk).grad_in("v", g.dv);
    }
  }
}
