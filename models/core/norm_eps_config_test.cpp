// Per-location RMSNorm epsilons (models/core/norm_eps.h, models/README.md "Norm epsilons"): a key
// of 0 falls back to model.norm_eps, a negative one is refused naming the key, and each norm of a
// model reads its own key. The exact values are checked against the PyTorch reference by
// torch_model_oracle (model_oracle_dump's *_eps cases, every location distinct).
#include "models/core/norm_eps.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "models/lm/language_model.h"
#include "tests/common/random.h"
#include "tests/common/tiny_models.h"

namespace amor::model {
namespace {

// The places a key can be set, by its name in messages.
const std::pair<const char*, std::function<double&(ModelConfig&)>> kKeys[] = {
    {"model.mixer_norm_eps", [](ModelConfig& c) -> double& { return c.mixer_norm_eps; }},
    {"model.mlp_norm_eps", [](ModelConfig& c) -> double& { return c.mlp_norm_eps; }},
    {"model.norm_f_eps", [](ModelConfig& c) -> double& { return c.norm_f_eps; }},
    {"model.amor.norm_eps", [](ModelConfig& c) -> double& { return c.amor.norm_eps; }},
    {"model.mamba2.norm_eps", [](ModelConfig& c) -> double& { return c.mamba2.norm_eps; }},
};

TEST(NormEps, ZeroFallsBackToNormEps) {
  ModelConfig c;
  c.norm_eps = 3e-5;
  NormEps e = norm_eps_of(c);
  for (double v : {e.mixer, e.mlp, e.norm_f, e.amor, e.mamba2, e.other}) EXPECT_EQ(v, 3e-5);
  EXPECT_EQ(e.gdn, 1e-5);  // model.gdn.norm_eps has its own default, no fallback
  c.mixer_norm_eps = 1e-6;
  c.mlp_norm_eps = 2e-6;
  c.norm_f_eps = 3e-6;
  c.amor.norm_eps = 4e-6;
  c.mamba2.norm_eps = 5e-6;
  c.gdn.norm_eps = 6e-6;
  e = norm_eps_of(c);
  EXPECT_EQ(e.mixer, 1e-6);
  EXPECT_EQ(e.mlp, 2e-6);
  EXPECT_EQ(e.norm_f, 3e-6);
  EXPECT_EQ(e.amor, 4e-6);
  EXPECT_EQ(e.mamba2, 5e-6);
  EXPECT_EQ(e.gdn, 6e-6);
  EXPECT_EQ(e.other, 3e-5);
}

void expect_error(const ModelConfig& c, const std::string& key) {
  try {
    build_model(c, DType::F32);
    ADD_FAILURE() << "no error for " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(NormEps, NegativeValuesAreErrorsNamingTheKey) {
  const ModelConfig base = testing::tiny_model("amor", 16, 2, 32);
  for (const auto& [key, member] : kKeys) {
    ModelConfig c = base;
    c.amor.backbone = "mamba2";
    member(c) = -1e-6;
    expect_error(c, key);
  }
  ModelConfig c = base;
  c.norm_eps = 0;
  expect_error(c, "model.norm_eps");
}

// Per-token losses of one training forward of an AMOR-over-Mamba2 model (every location but
// GDN's, which has no fallback) from a fixed seed; the epsilons do not change the init.
std::vector<double> losses(const ModelConfig& c) {
  auto m = build_model(c, DType::F64);
  m->params().initialize(11);
  Batch b;
  b.tokens = testing::randint({2, 9}, 12, c.vocab);
  b.targets = testing::randint({2, 9}, 13, c.vocab);
  Tensor l = m->forward(b, /*training=*/true).token_loss;
  std::vector<double> out;
  for (int64_t i = 0; i < l.numel(); ++i) out.push_back(l.item(i));
  return out;
}

ModelConfig amor_mamba2() {
  ModelConfig c = testing::tiny_model("amor", 16, 2, 32);
  c.amor.backbone = "mamba2";
  c.amor.blocks = 3;
  c.init_std = 0.3;
  return c;
}

TEST(NormEps, EveryNormReadsItsOwnKey) {
  // Large epsilons (the norm inputs' mean squares are ~0.1-1) so that each one shows in the loss.
  const double big = 0.7;
  const ModelConfig base = amor_mamba2();
  const std::vector<double> at_default = losses(base);
  // model.norm_eps at `big` is each key at `big`, exactly: every norm of the model follows its
  // key, and no norm of it reads model.norm_eps past its key.
  ModelConfig all_fallback = base;
  all_fallback.norm_eps = big;
  ModelConfig all_keys = base;
  for (const auto& [key, member] : kKeys) member(all_keys) = big;
  EXPECT_EQ(losses(all_fallback), losses(all_keys));
  EXPECT_NE(losses(all_keys), at_default);
  // ... and each key alone moves the loss: each is some norm's epsilon.
  for (const auto& [key, member] : kKeys) {
    ModelConfig c = base;
    member(c) = big;
    EXPECT_NE(losses(c), at_default) << key;
  }
}

TEST(NormEps, GdnOutputNormReadsItsKey) {
  ModelConfig c = amor_mamba2();
  c.amor.backbone = "gdn";
  const std::vector<double> at_default = losses(c);
  c.norm_eps = 0.7;
  c.mixer_norm_eps = c.mlp_norm_eps = c.norm_f_eps = c.amor.norm_eps = 1e-5;
  EXPECT_EQ(losses(c), at_default);  // model.norm_eps reaches no norm of this model
  c.gdn.norm_eps = 0.7;
  EXPECT_NE(losses(c), at_default);
}

}  // namespace
}  // namespace amor::model
