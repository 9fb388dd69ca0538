// Mamba2 mixer: finite-difference gradients of the input and every parameter (G = 1 and 2, T not a
// multiple of the chunk), chunked scan == step-by-step scan through the whole mixer, the mamba_ssm
// init ranges, parameter names/shapes/decay at d = 768, config errors, and agreement with the
// PyTorch reference (tests/torch_ref/mamba2.py via tests/mamba2_check.py) on the same weights.
#include "models/mixers/mamba2_mixer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
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

const int64_t kB = 2, kT = 9;  // T = 9 with chunk 4: two full chunks and a partial one

ModelConfig tiny(int64_t groups) {
  ModelConfig c;
  c.d_model = 8;
  c.init_std = 0.5;  // large enough that every path carries signal
  c.mamba2.expand = 2;
  c.mamba2.head_dim = 4;  // d_inner 16, H = 4
  c.mamba2.d_state = 4;
  c.mamba2.n_groups = groups;
  c.mamba2.conv_kernel = 4;
  c.mamba2.chunk = 4;
  return c;
}

struct Built {
  std::unique_ptr<ParamStore> ps;
  std::unique_ptr<Mamba2Mixer> mixer;
};

Built build(const ModelConfig& cfg, uint64_t seed) {
  Built b{std::make_unique<ParamStore>(DType::F64), nullptr};
  b.mixer = std::make_unique<Mamba2Mixer>(*b.ps, "layers.0.mixer", cfg);
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
  auto reports = testing::gradcheck(
      [&] { return std::vector<Tensor>{b.mixer->forward(x, MixerContext{})}; }, {w}, inputs);
  double worst = 0;
  for (auto& r : reports) worst = std::max(worst, r.error);
  std::printf("gradcheck G=%lld: worst scaled error %.2e\n", (long long)cfg.mamba2.n_groups, worst);
}

TEST(Mamba2Mixer, GradcheckOneGroup) { check_gradients(tiny(1), 10); }
TEST(Mamba2Mixer, GradcheckTwoGroups) { check_gradients(tiny(2), 20); }

TEST(Mamba2Mixer, ChunkedEqualsRecurrent) {
  ModelConfig chunked = tiny(2), stepwise = tiny(2);
  stepwise.mamba2.chunk = 0;
  Built a = build(chunked, 30), s = build(stepwise, 30);
  Tensor x = testing::randn({kB, kT, 8}, 31), dy = testing::randn({kB, kT, 8}, 32);
  auto [ya, dxa] = run(a, x, dy);
  auto [ys, dxs] = run(s, x, dy);
  EXPECT_LT(testing::rel_rms(ya, ys), 1e-12);
  EXPECT_LT(testing::rel_rms(dxa, dxs), 1e-12);
  for (size_t i = 0; i < a.ps->params().size(); ++i)
    EXPECT_LT(testing::rel_rms(a.ps->params()[i]->grad, s.ps->params()[i]->grad), 1e-12)
        << a.ps->params()[i]->name;
}

TEST(Mamba2Mixer, InitFollowsMambaSsm) {
  ModelConfig c;
  c.d_model = 256;
  c.mamba2.head_dim = 8;  // H = 64 heads: many draws of dt and A
  c.mamba2.d_state = 8;
  ParamStore ps(DType::F64);
  Mamba2Mixer m(ps, "m", c);
  ps.initialize(7);
  const auto& mc = c.mamba2;
  for (int64_t h = 0; h < m.heads(); ++h) {
    double b = ps.find("m.dt_bias")->value.item(h);
    double dt = std::log1p(std::exp(b));  // softplus
    EXPECT_GE(dt, mc.dt_min * (1 - 1e-12));
    EXPECT_LE(dt, mc.dt_max * (1 + 1e-12));
    double a = -std::exp(ps.find("m.A_log")->value.item(h));
    EXPECT_GE(a, -mc.a_max);
    EXPECT_LE(a, -mc.a_min);
    EXPECT_EQ(ps.find("m.D")->value.item(h), 1.0);
  }
  const double bound = 1.0 / std::sqrt(double(mc.conv_kernel));
  for (const char* n : {"m.conv1d.weight", "m.conv1d.bias"}) {
    const Tensor& t = ps.find(n)->value;
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_LE(std::abs(t.item(i)), bound) << n;
  }
  const Tensor& nw = ps.find("m.norm.weight")->value;
  for (int64_t i = 0; i < nw.numel(); ++i) EXPECT_EQ(nw.item(i), 1.0);
  const Tensor& w = ps.find("m.in_proj.weight")->value;
  double ss = 0;
  for (int64_t i = 0; i < w.numel(); ++i) ss += w.item(i) * w.item(i);
  EXPECT_NEAR(std::sqrt(ss / w.numel()), c.init_std, 0.05 * c.init_std);
}

TEST(Mamba2Mixer, ParametersAtD768) {
  ModelConfig c;
  c.d_model = 768;  // defaults: N 128, expand 2, P 64, G 1, K 4 -> d_inner 1536, H 24
  ParamStore ps(DType::F32);
  Mamba2Mixer m(ps, "layers.3.mixer", c);
  struct Want {
    const char* name;
    Shape shape;
    bool decay;
  };
  const std::vector<Want> want{{"in_proj.weight", {3352, 768}, true},
                               {"conv1d.weight", {1792, 4}, true},
                               {"conv1d.bias", {1792}, false},
                               {"dt_bias", {24}, false},
                               {"A_log", {24}, false},
                               {"D", {24}, false},
                               {"norm.weight", {1536}, false},
                               {"out_proj.weight", {768, 1536}, true}};
  ASSERT_EQ(ps.params().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Param& p = *ps.params()[i];
    EXPECT_EQ(p.name, std::string("layers.3.mixer.") + want[i].name);
    EXPECT_EQ(p.value.shape(), want[i].shape) << p.name;
    EXPECT_EQ(p.weight_decay, want[i].decay) << p.name;
  }
}

void expect_config_error(const ModelConfig& c, const std::string& key) {
  ParamStore ps(DType::F64);
  try {
    Mamba2Mixer m(ps, "m", c);
    ADD_FAILURE() << "no error for a bad " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(Mamba2Mixer, BadConfigsNameTheKey) {
  ModelConfig c = tiny(1);
  c.mamba2.head_dim = 5;  // 16 channels do not split into heads of 5
  expect_config_error(c, "model.mamba2.head_dim");
  c = tiny(3);  // 4 heads do not split into 3 groups
  expect_config_error(c, "model.mamba2.n_groups");
  c = tiny(1);
  c.mamba2.d_state = 0;
  expect_config_error(c, "model.mamba2.d_state");
  c = tiny(1);
  c.mamba2.expand = 0;
  expect_config_error(c, "model.mamba2.expand");
  c = tiny(1);
  c.mamba2.conv_kernel = 0;
  expect_config_error(c, "model.mamba2.conv_kernel");
  c = tiny(1);
  c.mamba2.chunk = -1;
  expect_config_error(c, "model.mamba2.chunk");
  c = tiny(1);
  c.mamba2.dt_min = 0.5;  // above dt_max
  expect_config_error(c, "model.mamba2.dt_min");
  c = tiny(1);
  c.mamba2.a_min = 0;  // A_log = log(0)
  expect_config_error(c, "model.mamba2.a_min");
}

// Writes one case for tests/mamba2_check.py.
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
}

TEST(Mamba2Mixer, MatchesPyTorchReference) {
  namespace fs = std::filesystem;
  const fs::path repo = fs::path(AMOR_SOURCE_DIR);
  const fs::path root = fs::temp_directory_path() / ("amor_mamba2_" + std::to_string(getpid()));
  fs::remove_all(root);
  ModelConfig big_state = tiny(2);
  big_state.d_model = 12;  // d_inner 24, H 6 in 2 groups, N 5, K 3, T = 9 with chunk 4
  big_state.mamba2.d_state = 5;
  big_state.mamba2.conv_kernel = 3;
  write_case(root / "g1", tiny(1), 40);
  write_case(root / "g2", tiny(2), 50);
  write_case(root / "g2_wide", big_state, 60);
  const std::string cmd = std::string(AMOR_PYTHON) + " '" + (repo / "tests" / "mamba2_check.py").string() +
                          "' '" + (root / "g1").string() + "' '" + (root / "g2").string() + "' '" +
                          (root / "g2_wide").string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove_all(root);
}

}  // namespace
}  // namespace amor::model
