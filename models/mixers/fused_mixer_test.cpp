// Fused (Hymba-style) mixer: finite-difference gradients of the input and every parameter for both
// recurrent halves (mamba2, gdn; and GQA attention), parameter names/shapes/weight decay, the
// unknown-fused_linear error, and agreement with the PyTorch reference tests/torch_ref/fused.py on
// the same weights (outputs, input and parameter gradients).
#include "models/mixers/fused_mixer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/core/config_json.h"
#include "models/io/safetensors.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"
#include "tests/common/recurrent_params.h"

namespace amor::model {
namespace {

const int64_t kB = 2, kT = 9;  // T = 9 with scan chunk 4: two full chunks and a partial one
const char* kPrefix = "layers.1.mixer";

// Tiny dims as models/lm/model_gradcheck_test.cpp's tiny(): d 8, attention heads of 4, Mamba2
// heads of 4 with N 4, one GDN head of K 4.
ModelConfig tiny(const std::string& linear) {
  ModelConfig c;
  c.kind = "fused";
  c.fused_linear = linear;
  c.d_model = 8;
  c.head_dim = 4;
  c.init_std = 0.5;  // large enough that every path carries signal
  c.mamba2.head_dim = 4;
  c.mamba2.d_state = 4;
  c.mamba2.chunk = 4;
  c.gdn.head_dim = 4;
  c.gdn.qk_ratio = 0.5;
  c.gdn.chunk = 4;
  return c;
}

struct Built {
  std::unique_ptr<ParamStore> ps;
  std::unique_ptr<FusedMixer> mixer;
};

Built build(const ModelConfig& cfg, uint64_t seed) {
  Built b{std::make_unique<ParamStore>(DType::F64), nullptr};
  b.mixer = std::make_unique<FusedMixer>(*b.ps, kPrefix, cfg);
  b.ps->initialize(seed);
  testing::randomize_recurrent_params(*b.ps, seed + 100);
  return b;
}

// Runs forward and backward; returns {y, dx} with the parameter gradients left in the store.
std::pair<Tensor, Tensor> run(Built& b, const Tensor& x, const Tensor& dy) {
  b.ps->zero_grad();
  Tensor y = b.mixer->forward(x, MixerContext{});
  Tensor dx = b.mixer->backward(dy);
  return {y, dx};
}

void check_gradients(const ModelConfig& cfg, uint64_t seed) {
  Built b = build(cfg, seed);
  Tensor x = testing::randn({kB, kT, cfg.d_model}, seed + 1);
  Tensor w = testing::randn({kB, kT, cfg.d_model}, seed + 2);
  auto [y, dx] = run(b, x, w);
  std::vector<testing::GradInput> inputs{{"x", x, dx}};
  for (auto& p : b.ps->params()) inputs.push_back({p->name, p->value, p->grad.clone()});
  testing::gradcheck([&] { return std::vector<Tensor>{b.mixer->forward(x, MixerContext{})}; },
                     {w}, inputs);
}

TEST(FusedMixer, GradcheckMamba2) { check_gradients(tiny("mamba2"), 10); }
TEST(FusedMixer, GradcheckGdn) { check_gradients(tiny("gdn"), 20); }
TEST(FusedMixer, GradcheckGqaGdn) {
  ModelConfig c = tiny("gdn");
  c.n_kv_heads = 1;
  check_gradients(c, 30);
}

TEST(FusedMixer, ParameterNamesShapesAndDecay) {
  ModelConfig c = tiny("gdn");
  ParamStore ps(DType::F32);
  FusedMixer m(ps, "m", c);
  // d 8; GDN: H 1, K 4, V 8; conv kernel 4.
  struct Want {
    const char* name;
    Shape shape;
    bool decay;
  };
  const std::vector<Want> want{
      {"m.attn.q_proj.weight", {8, 8}, true},     {"m.attn.k_proj.weight", {8, 8}, true},
      {"m.attn.v_proj.weight", {8, 8}, true},     {"m.attn.o_proj.weight", {8, 8}, true},
      {"m.linear.q_proj.weight", {4, 8}, true},   {"m.linear.q_conv1d.weight", {4, 4}, true},
      {"m.linear.k_proj.weight", {4, 8}, true},   {"m.linear.k_conv1d.weight", {4, 4}, true},
      {"m.linear.v_proj.weight", {8, 8}, true},   {"m.linear.v_conv1d.weight", {8, 4}, true},
      {"m.linear.a_proj.weight", {1, 8}, true},   {"m.linear.b_proj.weight", {1, 8}, true},
      {"m.linear.g_proj.weight", {8, 8}, true},   {"m.linear.o_proj.weight", {8, 8}, true},
      {"m.linear.A_log", {1}, false},             {"m.linear.dt_bias", {1}, false},
      {"m.linear.o_norm.weight", {8}, false},     {"m.attn_norm.weight", {8}, false},
      {"m.linear_norm.weight", {8}, false}};
  ASSERT_EQ(ps.params().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Param& p = *ps.params()[i];
    EXPECT_EQ(p.name, want[i].name);
    EXPECT_EQ(p.value.shape(), want[i].shape) << p.name;
    EXPECT_EQ(p.weight_decay, want[i].decay) << p.name;
  }
  ps.initialize(1);
  for (const char* n : {"m.attn_norm.weight", "m.linear_norm.weight"})
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(ps.find(n)->value.item(i), 1.0) << n;
}

TEST(FusedMixer, Mamba2HalfHasMamba2Parameters) {
  ParamStore ps(DType::F32);
  FusedMixer m(ps, "m", tiny("mamba2"));
  EXPECT_NE(ps.find("m.linear.in_proj.weight"), nullptr);
  EXPECT_NE(ps.find("m.linear.out_proj.weight"), nullptr);
  EXPECT_EQ(ps.find("m.linear.q_proj.weight"), nullptr);
}

TEST(FusedMixer, UnknownLinearNamesTheKeyAndChoices) {
  ModelConfig c = tiny("rwkv");
  ParamStore ps(DType::F64);
  try {
    FusedMixer m(ps, "m", c);
    ADD_FAILURE() << "no error for fused_linear 'rwkv'";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "model.fused_linear: 'rwkv' is not one of mamba2, gdn");
  }
}

// Writes one case for tests/torch_ref/fused.py.
void write_case(const std::filesystem::path& dir, const ModelConfig& cfg, uint64_t seed) {
  std::filesystem::create_directories(dir);
  Built b = build(cfg, seed);
  Tensor x = testing::randn({kB, kT, cfg.d_model}, seed + 1);
  Tensor dy = testing::randn({kB, kT, cfg.d_model}, seed + 2);
  auto [y, dx] = run(b, x, dy);
  std::vector<std::pair<std::string, Tensor>> weights, ours{{"y", y}, {"dx", dx}};
  for (auto& p : b.ps->params()) {
    weights.emplace_back(p->name, p->value);
    ours.emplace_back("grad." + p->name, p->grad);
  }
  save_safetensors((dir / "weights.safetensors").string(), weights);
  save_safetensors((dir / "io.safetensors").string(), {{"x", x}, {"dy", dy}});
  save_safetensors((dir / "ours.safetensors").string(), ours);
  std::ofstream(dir / "config.json") << to_json(cfg).dump() << "\n";
  std::ofstream(dir / "prefix.txt") << kPrefix << "\n";
}

TEST(FusedMixer, MatchesPyTorchReference) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("amor_fused_" + std::to_string(getpid()));
  fs::remove_all(root);
  ModelConfig wide = tiny("mamba2");  // two Mamba2 groups, a shorter conv, 3 attention heads
  wide.d_model = 12;
  wide.mamba2.n_groups = 2;
  wide.mamba2.d_state = 5;
  wide.mamba2.conv_kernel = 3;
  ModelConfig gqa = tiny("gdn");
  gqa.n_kv_heads = 1;
  std::vector<fs::path> cases{root / "mamba2", root / "gdn", root / "mamba2_wide", root / "gdn_gqa"};
  write_case(cases[0], tiny("mamba2"), 40);
  write_case(cases[1], tiny("gdn"), 50);
  write_case(cases[2], wide, 60);
  write_case(cases[3], gqa, 70);
  std::string cmd = std::string(AMOR_PYTHON) + " '" +
                    (fs::path(AMOR_SOURCE_DIR) / "tests" / "torch_ref" / "fused.py").string() + "'";
  for (auto& c : cases) cmd += " '" + c.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove_all(root);
}

}  // namespace
}  // namespace amor::model
