// Gated DeltaNet mixer: finite-difference gradients in double of the input and every parameter;
// the chunked scan equals the step-by-step recurrence inside the mixer; parameter names, shapes,
// count and init; bad configs name their key; and the PyTorch reference (tests/torch_ref/gdn.py,
// a token-by-token delta rule) reproduces our output and all gradients (tests/gdn_check.py).
#include "models/mixers/gdn_mixer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/elementwise/elementwise.h"
#include "models/core/config_json.h"
#include "models/io/safetensors.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor::model {
namespace {

const std::string kPrefix = "layers.0.mixer";

// d=16, K=4, qk_ratio 0.5 -> H=2 heads, V=8; chunk 4 so that T=9 ends in a partial chunk.
ModelConfig tiny() {
  ModelConfig c;
  c.kind = "gdn";
  c.d_model = 16;
  c.init_std = 0.3;
  c.gdn.head_dim = 4;
  c.gdn.qk_ratio = 0.5;
  c.gdn.v_expand = 2.0;
  c.gdn.chunk = 4;
  return c;
}

// A mixer in double with initialised parameters; the norm weight and A_log/dt_bias are then
// perturbed so that no parameter sits at a special value (all-ones, tiny dt) that could hide a
// wrong gradient term.
struct Fixture {
  explicit Fixture(const ModelConfig& cfg, uint64_t seed)
      : ps(DType::F64), mixer(ps, kPrefix, cfg) {
    ps.initialize(seed);
    int i = 0;
    for (auto& p : ps.params()) {
      if (p->value.dim() == 1)
        add_(p->value, testing::randn(p->value.shape(), seed + 100 + i, DType::F64, 0.5));
      ++i;
    }
  }
  ParamStore ps;
  GdnMixer mixer;
};

struct Result {
  Tensor y, dx;
};

Result run(Fixture& f, const Tensor& x, const Tensor& dy) {
  f.ps.zero_grad();
  Tensor y = f.mixer.forward(x, MixerContext{});
  return {y, f.mixer.backward(dy)};
}

TEST(GdnMixer, GradcheckInputAndEveryParameter) {
  Fixture f(tiny(), 1);
  const int64_t B = 2, T = 9;
  Tensor x = testing::randn({B, T, 16}, 2);
  Tensor dy = testing::randn({B, T, 16}, 3);
  Result r = run(f, x, dy);
  std::vector<testing::GradInput> inputs{{"x", x, r.dx}};
  for (auto& p : f.ps.params()) inputs.push_back({p->name, p->value, p->grad.clone()});
  ASSERT_EQ(inputs.size(), 14u);
  auto reports = testing::gradcheck(
      [&] { return std::vector<Tensor>{f.mixer.forward(x, MixerContext{})}; }, {dy}, inputs);
  double worst = 0;
  for (auto& rep : reports) worst = std::max(worst, rep.error);
  RecordProperty("worst_error", fmt::format("{:.3g}", worst));
}

TEST(GdnMixer, ChunkedScanEqualsRecurrence) {
  ModelConfig rec = tiny();
  rec.gdn.chunk = 0;
  Fixture fc(tiny(), 5), fr(rec, 5);
  Tensor x = testing::randn({2, 9, 16}, 6);
  Tensor dy = testing::randn({2, 9, 16}, 7);
  Result a = run(fc, x, dy), b = run(fr, x, dy);
  EXPECT_LT(testing::rel_rms(a.y, b.y), 1e-12);
  EXPECT_LT(testing::rel_rms(a.dx, b.dx), 1e-12);
  for (size_t i = 0; i < fc.ps.params().size(); ++i)
    EXPECT_LT(testing::rel_rms(fc.ps.params()[i]->grad, fr.ps.params()[i]->grad), 1e-12)
        << fc.ps.params()[i]->name;
}

// The 180M preset's width: names, shapes, weight decay, the exact count, and init statistics.
TEST(GdnMixer, ParametersAndInitAtD768) {
  ModelConfig c;
  c.d_model = 768;
  ParamStore ps(DType::F32);
  GdnMixer m(ps, kPrefix, c);
  EXPECT_EQ(m.heads(), 9);
  EXPECT_EQ(m.head_k_dim(), 64);
  EXPECT_EQ(m.head_v_dim(), 128);
  struct Expect {
    std::string name;
    Shape shape;
    bool decay;
  };
  std::vector<Expect> want{
      {"q_proj.weight", {576, 768}, true},    {"q_conv1d.weight", {576, 4}, true},
      {"k_proj.weight", {576, 768}, true},    {"k_conv1d.weight", {576, 4}, true},
      {"v_proj.weight", {1152, 768}, true},   {"v_conv1d.weight", {1152, 4}, true},
      {"a_proj.weight", {9, 768}, true},      {"b_proj.weight", {9, 768}, true},
      {"g_proj.weight", {1152, 768}, true},   {"o_proj.weight", {768, 1152}, true},
      {"A_log", {9}, false},                  {"dt_bias", {9}, false},
      {"o_norm.weight", {128}, false}};
  ASSERT_EQ(ps.params().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Param& p = *ps.params()[i];
    EXPECT_EQ(p.name, kPrefix + "." + want[i].name);
    EXPECT_EQ(p.value.shape(), want[i].shape) << p.name;
    EXPECT_EQ(p.weight_decay, want[i].decay) << p.name;
  }
  EXPECT_EQ(ps.numel(), 3562130);

  ps.initialize(11);
  auto stats = [&](const std::string& name) {
    std::vector<double> v = ps.find(kPrefix + "." + name)->value.to(DType::F64).to_vector<double>();
    double mean = 0, sq = 0, lo = v[0], hi = v[0];
    for (double e : v) mean += e, sq += e * e, lo = std::min(lo, e), hi = std::max(hi, e);
    mean /= v.size();
    return std::array<double, 4>{mean, std::sqrt(sq / v.size() - mean * mean), lo, hi};
  };
  auto q = stats("q_proj.weight");
  EXPECT_NEAR(q[0], 0.0, 1e-3);
  EXPECT_NEAR(q[1], 0.02, 1e-3);
  auto conv = stats("v_conv1d.weight");  // U(-1/2, 1/2): std 1/sqrt(12)
  EXPECT_GE(conv[2], -0.5);
  EXPECT_LE(conv[3], 0.5);
  EXPECT_NEAR(conv[1], 1.0 / std::sqrt(12.0), 0.02);
  auto norm = stats("o_norm.weight");
  EXPECT_EQ(norm[2], 1.0);
  EXPECT_EQ(norm[3], 1.0);
  // A = exp(A_log) in (0, 16]; dt = softplus(dt_bias) in [1e-3, 0.1].
  for (double a : ps.find(kPrefix + ".A_log")->value.to(DType::F64).to_vector<double>()) {
    EXPECT_TRUE(std::isfinite(a));
    EXPECT_LE(std::exp(a), 16.0 * (1 + 1e-6));
  }
  for (double b : ps.find(kPrefix + ".dt_bias")->value.to(DType::F64).to_vector<double>()) {
    double dt = std::log1p(std::exp(b));
    EXPECT_GE(dt, 1e-3 * (1 - 1e-5));
    EXPECT_LE(dt, 0.1 * (1 + 1e-5));
  }
}

// dt below dt_floor is raised to it; A_log follows a_min/a_max.
TEST(GdnMixer, InitFollowsDtFloorAndARange) {
  ModelConfig c = tiny();
  c.gdn.dt_min = c.gdn.dt_max = 1e-5;
  c.gdn.dt_floor = 1e-2;
  c.gdn.a_min = c.gdn.a_max = 3.0;
  ParamStore ps(DType::F64);
  GdnMixer m(ps, kPrefix, c);
  ps.initialize(3);
  for (double b : ps.find(kPrefix + ".dt_bias")->value.to_vector<double>())
    EXPECT_NEAR(std::log1p(std::exp(b)), 1e-2, 1e-12);
  for (double a : ps.find(kPrefix + ".A_log")->value.to_vector<double>())
    EXPECT_NEAR(a, std::log(3.0), 1e-12);
}

TEST(GdnMixer, BadConfigNamesTheKey) {
  auto expect_error = [](ModelConfig c, const std::string& key) {
    ParamStore ps(DType::F64);
    try {
      GdnMixer m(ps, kPrefix, c);
      ADD_FAILURE() << "no error for a bad " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  ModelConfig c = tiny();
  c.gdn.head_dim = 0;
  expect_error(c, "model.gdn.head_dim");
  c = tiny();
  c.gdn.qk_ratio = 0.1;  // round(0.1 * 16 / 4) = 0 heads
  expect_error(c, "model.gdn.qk_ratio");
  c = tiny();
  c.gdn.v_expand = 1.3;  // V = 5.2
  expect_error(c, "model.gdn.v_expand");
  c = tiny();
  c.gdn.conv_kernel = 0;
  expect_error(c, "model.gdn.conv_kernel");
  c = tiny();
  c.gdn.chunk = -1;
  expect_error(c, "model.gdn.chunk");
  c = tiny();
  c.gdn.norm_eps = 0;
  expect_error(c, "model.gdn.norm_eps");
  c = tiny();
  c.gdn.dt_max = c.gdn.dt_min / 2;
  expect_error(c, "model.gdn.dt_max");
  c = tiny();
  c.gdn.dt_floor = 0;
  expect_error(c, "model.gdn.dt_floor");
  c = tiny();
  c.gdn.a_min = -1;
  expect_error(c, "model.gdn.a_min");
}

// Writes one case for tests/gdn_check.py and runs it.
TEST(GdnMixer, MatchesPyTorchReference) {
  const auto repo = std::filesystem::path(AMOR_SOURCE_DIR);
  const auto dir =
      std::filesystem::temp_directory_path() / ("amor_gdn_check_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  // Other shapes than the gradcheck's: H = round(1.5 * 16 / 8) = 3 heads, K = 8, V = 12, a
  // kernel-3 conv; T = 11 with chunk 4 ends in a partial chunk.
  ModelConfig cfg = tiny();
  cfg.gdn.head_dim = 8;
  cfg.gdn.qk_ratio = 1.5;
  cfg.gdn.v_expand = 1.5;
  cfg.gdn.conv_kernel = 3;
  Fixture f(cfg, 21);
  Tensor x = testing::randn({2, 11, 16}, 22);
  Tensor dy = testing::randn({2, 11, 16}, 23);
  Result r = run(f, x, dy);

  std::vector<std::pair<std::string, Tensor>> weights, grads;
  for (auto& p : f.ps.params()) {
    weights.emplace_back(p->name, p->value);
    grads.emplace_back("grad." + p->name, p->grad);
  }
  save_safetensors((dir / "weights.safetensors").string(), weights);
  save_safetensors((dir / "grads.safetensors").string(), grads);
  save_safetensors((dir / "case.safetensors").string(),
                   {{"x", x}, {"dy", dy}, {"y", r.y}, {"dx", r.dx}});
  json::Object o = to_json(cfg).as_object();
  o.emplace_back("prefix", json::Value(kPrefix));
  std::ofstream(dir / "config.json") << json::Value(std::move(o)).dump() << "\n";

  const std::string cmd = std::string(AMOR_PYTHON) + " '" + (repo / "tests" / "gdn_check.py").string() +
                          "' '" + dir.string() + "'";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << " (the case is left there)";
  if (rc == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace amor::model
