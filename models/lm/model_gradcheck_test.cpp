// Whole-model finite-difference gradient checks in double on tiny configs: every parameter's
// gradient (and through them every op's backward as wired in the model) against central
// differences of L = sum_t w_t * loss_t with random per-token weights w.
#include <gtest/gtest.h>

#include "models/lm/language_model.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"
#include "tests/common/tiny_models.h"

namespace amor::model {
namespace {

ModelConfig tiny(const std::string& kind) {
  ModelConfig c = testing::tiny_model(kind, /*d_model=*/8, /*n_layers=*/2, /*vocab=*/13);  // 1 GDN head
  c.vocab_chunk = 5;  // several vocabulary chunks, the last one partial
  c.init_std = 0.5;   // large enough that every path carries signal
  return c;
}

// training = false for models whose training forward is random by design (Oryx's modes): the
// check needs the same function at every evaluation.
void check_model_gradients(const ModelConfig& cfg, uint64_t seed, bool training = true) {
  auto model = build_model(cfg, DType::F64);
  model->params().initialize(seed);
  const int64_t B = 2, T = 7;
  Batch batch{testing::randint({B, T}, seed + 1, cfg.vocab), testing::randint({B, T}, seed + 2, cfg.vocab)};
  batch.targets.data<int32_t>()[3] = -100;  // an ignored position
  Tensor w = testing::randn({B, T}, seed + 3);
  model->params().zero_grad();
  model->forward(batch, training);
  model->backward(w);
  std::vector<testing::GradInput> inputs;
  for (auto& p : model->params().params()) inputs.push_back({p->name, p->value, p->grad.clone()});
  testing::gradcheck([&] { return std::vector<Tensor>{model->forward(batch, training).token_loss}; },
                     {w}, inputs);
}

TEST(ModelGradcheck, Transformer) { check_model_gradients(tiny("transformer"), 10); }

TEST(ModelGradcheck, TransformerGqaNoMlp) {
  ModelConfig c = tiny("transformer");
  c.n_kv_heads = 1;
  c.d_ff = 0;
  check_model_gradients(c, 20);
}

TEST(ModelGradcheck, Mamba2) { check_model_gradients(tiny("mamba2"), 30); }

TEST(ModelGradcheck, SerialMambaAttention) {
  ModelConfig c = tiny("serial");
  c.pattern = "MA";
  check_model_gradients(c, 40);
}

TEST(ModelGradcheck, Gdn) { check_model_gradients(tiny("gdn"), 50); }

TEST(ModelGradcheck, OryxBothLinearKinds) {
  for (const char* linear : {"gdn", "mamba2"}) {
    ModelConfig c = tiny("oryx");
    c.oryx.linear = linear;
    c.oryx.schedule = "linear:3,attention:2";  // switches both ways within T = 7
    check_model_gradients(c, 60, /*training=*/false);
  }
}

TEST(ModelGradcheck, FusedBothLinearKinds) {
  for (const char* linear : {"mamba2", "gdn"}) {
    ModelConfig c = tiny("fused");
    c.fused_linear = linear;
    check_model_gradients(c, 70);
  }
}

TEST(Models, BadKindsAndPatternsAreClearErrors) {
  ModelConfig c = tiny("nonsense");
  EXPECT_THROW(build_model(c, DType::F64), Error);
  c.kind = "serial";
  c.pattern = "MMX";
  EXPECT_THROW(build_model(c, DType::F64), Error);
  c.pattern = "AAA";
  EXPECT_THROW(build_model(c, DType::F64), Error);  // 2 layers is not a multiple of 3
}

}  // namespace
}  // namespace amor::model
