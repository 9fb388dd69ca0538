// count_parameters (param_count.h) against the models themselves: tiny models of every kind and
// variant built and their ParamStore::numel() compared, AMOR-GDN 180M built at full size (exactly
// 181,967,832), AMOR-GDN 1.5B counted (exactly 1,524,025,472) with its d = 2048 layer and block
// shapes checked against a built one-layer model, and the errors for configs no model accepts.
#include "models/presets/param_count.h"

#include <gtest/gtest.h>

#include "models/lm/language_model.h"
#include "models/mixers/fused_mixer.h"
#include "models/presets/presets.h"
#include "models/presets/test_models.h"

namespace amor::model {
namespace {

using testing_models::build;
using testing_models::tiny;

// Every kind and the variants that change the parameter set.
std::vector<std::pair<std::string, ModelConfig>> tiny_variants() {
  std::vector<std::pair<std::string, ModelConfig>> v;
  v.emplace_back("transformer", tiny("transformer"));
  ModelConfig c = tiny("transformer");
  c.n_kv_heads = 2;
  c.d_ff = 0;
  v.emplace_back("transformer gqa, no mlp", c);
  v.emplace_back("mamba2", tiny("mamba2"));
  c = tiny("mamba2");
  c.mamba2.n_groups = 2;
  c.mamba2.conv_kernel = 3;
  c.mamba2.expand = 3;
  v.emplace_back("mamba2 G=2 K=3 expand 3", c);
  v.emplace_back("gdn", tiny("gdn"));
  c = tiny("gdn");
  c.gdn.qk_ratio = 0.75;  // 0.75 * 16 / 4 = 3 heads
  c.gdn.v_expand = 1.5;
  c.gdn.conv_kernel = 2;
  v.emplace_back("gdn 3 heads v_expand 1.5", c);
  c = tiny("serial");
  c.pattern = "MGA";
  c.n_layers = 3;
  v.emplace_back("serial MGA", c);
  for (const char* lin : {"mamba2", "gdn"}) {
    c = tiny("fused");
    c.fused_linear = lin;
    v.emplace_back(std::string("fused ") + lin, c);
    c = tiny("oryx");
    c.oryx.linear = lin;
    v.emplace_back(std::string("oryx ") + lin, c);
  }
  for (const char* backbone : {"gdn", "mamba2"})
    for (int64_t blocks : {1, 3}) {
      c = tiny("amor");
      c.amor.backbone = backbone;
      c.amor.blocks = blocks;
      v.emplace_back(fmt::format("amor {} K={}", backbone, blocks), c);
    }
  c = tiny("amor");
  c.amor.residual_mode = "h";
  c.n_kv_heads = 2;
  v.emplace_back("amor residual h, gqa", c);
  return v;
}

TEST(ParamCount, EqualsTheBuiltModelForEveryKind) {
  for (auto& [label, cfg] : tiny_variants()) {
    auto model = build(cfg, DType::F32);
    EXPECT_EQ(count_parameters(cfg), model->params().numel()) << label;
  }
}

TEST(ParamCount, MixerCountsEqualBuiltMixers) {
  // The fused mixer is the attention and recurrent mixers plus two [d] norms.
  for (const char* lin : {"mamba2", "gdn"}) {
    ModelConfig c = tiny("fused");
    c.fused_linear = lin;
    ParamStore ps(DType::F32);
    FusedMixer m(ps, "m", c);
    EXPECT_EQ(count_mixer_parameters('F', c), ps.numel()) << lin;
    EXPECT_EQ(count_mixer_parameters('F', c),
              count_mixer_parameters('A', c) + count_mixer_parameters(lin[0] == 'g' ? 'G' : 'M', c) +
                  2 * c.d_model);
  }
}

TEST(ParamCount, AmorGdn180mIsExactlyThePapersCountBuiltAtFullSize) {
  ModelConfig base;
  base.amor.backbone = "gdn";
  ModelConfig c = apply_preset(base, "amor-180m");
  EXPECT_EQ(count_parameters(c), 181'967'832);
  auto model = build(c, DType::BF16);  // bf16: the smallest store of 182M values and gradients
  EXPECT_EQ(model->params().numel(), 181'967'832);
}

TEST(ParamCount, AmorGdn1_5bIsExactlyThePapersCount) {
  ModelConfig base;
  base.amor.backbone = "gdn";
  ModelConfig c = apply_preset(base, "amor-1.5b");
  EXPECT_EQ(count_parameters(c), 1'524'025'472);
  // The full model would need ~6 GB even in bf16; the formula's d = 2048 terms (GDN heads, MLP,
  // blocks) are checked on a built one-layer model with a small vocabulary instead. The count is
  // affine in n_layers and vocab, so this and the 180M build cover every term.
  c.n_layers = 1;
  c.vocab = 16;
  auto model = build(c, DType::BF16);
  EXPECT_EQ(count_parameters(c), model->params().numel());
}

void expect_error(const ModelConfig& c, const std::string& text) {
  try {
    count_parameters(c);
    ADD_FAILURE() << "no error; expected one with: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(ParamCount, BadConfigsNameTheKey) {
  expect_error(tiny("rnn"), "model.kind: unknown kind 'rnn'");
  ModelConfig c = tiny("fused");
  c.fused_linear = "rwkv";
  expect_error(c, "model.fused_linear: 'rwkv' is not one of mamba2, gdn");
  c = tiny("oryx");
  c.oryx.linear = "rwkv";
  expect_error(c, "model.oryx.linear: 'rwkv'");
  c = tiny("serial");
  c.pattern = "MXA";
  expect_error(c, "model.pattern");
  c = tiny("amor");
  c.amor.blocks = 2;
  expect_error(c, "model.amor.blocks");
  c = tiny("amor");
  c.amor.backbone = "rwkv";
  expect_error(c, "model.amor.backbone");
  c = tiny("transformer");
  c.head_dim = 5;
  expect_error(c, "head_dim");
  c = tiny("mamba2");
  c.mamba2.head_dim = 5;
  expect_error(c, "model.mamba2.head_dim");
  c = tiny("gdn");
  c.gdn.qk_ratio = 0;
  expect_error(c, "model.gdn.qk_ratio");
  c = tiny("gdn");
  c.vocab = 0;
  expect_error(c, "expected positive sizes");
}

}  // namespace
}  // namespace amor::model
