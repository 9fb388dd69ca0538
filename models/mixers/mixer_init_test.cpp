// model.mamba2.init and model.gdn.init (models/README.md, "Init"): what each option draws, that
// the draws are deterministic given the seed, and that an unknown option is refused naming the
// key. (Each mixer's own test checks the default init in detail.)
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "models/mixers/gdn_mixer.h"
#include "models/mixers/mamba2_mixer.h"

namespace amor::model {
namespace {

ModelConfig mamba2_config(const std::string& init) {
  ModelConfig c;
  c.d_model = 256;
  c.mamba2.head_dim = 8;  // H = 64 heads: many draws
  c.mamba2.d_state = 8;
  c.mamba2.init = init;
  return c;
}

ModelConfig gdn_config(const std::string& init) {
  ModelConfig c;
  c.d_model = 256;
  c.gdn.head_dim = 16;  // H = 12 heads, K = 16, V = 32
  c.gdn.init = init;
  return c;
}

std::vector<double> values(const ParamStore& ps, const std::string& name) {
  const Tensor& t = ps.find(name)->value;
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.item(i));
  return v;
}

double rms(const std::vector<double>& v) {
  double ss = 0;
  for (double x : v) ss += x * x;
  return std::sqrt(ss / static_cast<double>(v.size()));
}

// Every parameter of a mixer built from c and initialised from seed.
template <class M>
std::vector<std::vector<double>> all_values(const ModelConfig& c, uint64_t seed) {
  ParamStore ps(DType::F64);
  M m(ps, "m", c);
  ps.initialize(seed);
  std::vector<std::vector<double>> out;
  for (const auto& p : ps.params()) out.push_back(values(ps, p->name));
  return out;
}

TEST(Mamba2Init, HfSetsALogToLogOneToH) {
  const ModelConfig c = mamba2_config("hf");
  ParamStore ps(DType::F64);
  Mamba2Mixer m(ps, "m", c);
  ps.initialize(7);
  const std::vector<double> a_log = values(ps, "m.A_log");
  ASSERT_EQ(static_cast<int64_t>(a_log.size()), m.heads());
  for (int64_t h = 0; h < m.heads(); ++h) EXPECT_EQ(a_log[h], std::log(double(h + 1))) << h;
  // The rest as mamba_ssm (transformers' Mamba2 draws dt alike; the AMOR authors re-draw the
  // projections N(0, 0.02); transformers 4.x leaves the conv at PyTorch's default).
  for (double b : values(ps, "m.dt_bias")) {
    const double dt = std::log1p(std::exp(b));  // softplus
    EXPECT_GE(dt, c.mamba2.dt_min * (1 - 1e-12));
    EXPECT_LE(dt, c.mamba2.dt_max * (1 + 1e-12));
  }
  for (double d : values(ps, "m.D")) EXPECT_EQ(d, 1.0);
  const double bound = 1.0 / std::sqrt(double(c.mamba2.conv_kernel));
  for (const char* n : {"m.conv1d.weight", "m.conv1d.bias"})
    for (double w : values(ps, n)) EXPECT_LE(std::abs(w), bound) << n;
  EXPECT_NEAR(rms(values(ps, "m.in_proj.weight")), c.init_std, 0.05 * c.init_std);
}

TEST(Mamba2Init, MambaSsmDrawsALogFromItsRange) {
  const ModelConfig c = mamba2_config("mamba_ssm");
  ParamStore ps(DType::F64);
  Mamba2Mixer m(ps, "m", c);
  ps.initialize(7);
  const std::vector<double> a_log = values(ps, "m.A_log");
  for (double a : a_log) {
    EXPECT_GE(a, std::log(c.mamba2.a_min));
    EXPECT_LE(a, std::log(c.mamba2.a_max));
  }
  EXPECT_GT(std::set<double>(a_log.begin(), a_log.end()).size(), a_log.size() - 1);  // random
  bool arange = true;
  for (size_t h = 0; h < a_log.size(); ++h) arange = arange && a_log[h] == std::log(double(h + 1));
  EXPECT_FALSE(arange);
}

TEST(Mamba2Init, DeterministicGivenTheSeed) {
  for (const char* init : {"mamba_ssm", "hf"}) {
    const ModelConfig c = mamba2_config(init);
    EXPECT_EQ(all_values<Mamba2Mixer>(c, 5), all_values<Mamba2Mixer>(c, 5)) << init;
    EXPECT_NE(all_values<Mamba2Mixer>(c, 5), all_values<Mamba2Mixer>(c, 6)) << init;
  }
}

TEST(GdnInit, ShortConvsByOption) {
  for (const char* init : {"fla_layer", "fla_model"}) {
    const ModelConfig c = gdn_config(init);
    ParamStore ps(DType::F64);
    GdnMixer m(ps, "m", c);
    ps.initialize(3);
    const double bound = 1.0 / std::sqrt(double(c.gdn.conv_kernel));
    for (const char* n : {"m.q_conv1d.weight", "m.k_conv1d.weight", "m.v_conv1d.weight"}) {
      const std::vector<double> w = values(ps, n);
      if (std::string(init) == "fla_layer") {  // PyTorch's Conv1d default: U(-b, b), rms b/sqrt(3)
        for (double x : w) EXPECT_LE(std::abs(x), bound) << n;
        EXPECT_NEAR(rms(w), bound / std::sqrt(3.0), 0.1 * bound) << n;
      } else {  // fla's model init: N(0, init_std)
        EXPECT_NEAR(rms(w), c.init_std, 0.15 * c.init_std) << n;
      }
    }
    // Both as fla's layer otherwise: A = exp(A_log) in [a_min, a_max], dt in [dt_min, dt_max].
    for (double a : values(ps, "m.A_log")) EXPECT_LE(std::exp(a), c.gdn.a_max);
    for (double b : values(ps, "m.dt_bias")) {
      const double dt = std::log1p(std::exp(b));
      EXPECT_GE(dt, c.gdn.dt_min * (1 - 1e-12));
      EXPECT_LE(dt, c.gdn.dt_max * (1 + 1e-12));
    }
    EXPECT_NEAR(rms(values(ps, "m.q_proj.weight")), c.init_std, 0.1 * c.init_std) << init;
    EXPECT_EQ(all_values<GdnMixer>(c, 5), all_values<GdnMixer>(c, 5)) << init;
    EXPECT_NE(all_values<GdnMixer>(c, 5), all_values<GdnMixer>(c, 6)) << init;
  }
}

TEST(MixerInit, UnknownOptionsAreErrorsNamingTheKey) {
  auto message = [](auto build) {
    try {
      build();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ParamStore ps(DType::F32);
  const std::string m = message([&] { Mamba2Mixer x(ps, "a", mamba2_config("xavier")); });
  EXPECT_NE(m.find("model.mamba2.init"), std::string::npos) << m;
  EXPECT_NE(m.find("xavier"), std::string::npos) << m;
  const std::string g = message([&] { GdnMixer x(ps, "b", gdn_config("fla")); });
  EXPECT_NE(g.find("model.gdn.init"), std::string::npos) << g;
}

}  // namespace
}  // namespace amor::model
