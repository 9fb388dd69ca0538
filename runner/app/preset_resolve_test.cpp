// The per-location norm epsilons and init options (issue #15 §1) in run configs: refused values
// name their key; presets fill the AMOR authors' values unless the run set a key itself; and a run
// that leaves the new keys at their defaults keeps its canonical text and hash.
#include <gtest/gtest.h>

#include "runner/app/preset_resolve.h"
#include "runner/config/config_test_util.h"
#include "runner/config/sweep.h"

namespace amor {
namespace {

using config::testing::config_error;
using config::testing::TempDir;

class PresetResolve : public ::testing::Test {
 protected:
  // The single run of a sweep file with these base lines (YAML under "base:").
  config::RunSpec run(const std::string& base_lines) {
    const std::string file = dir_.write("s.yaml", "name: s\nbase:\n" + base_lines);
    config::ExpandOptions eo;
    eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) {
      apply_model_preset(cfg, set_at);
    };
    auto runs = config::expand_sweep({file}, {}, eo);
    EXPECT_EQ(runs.size(), 1u);
    return runs.at(0);
  }
  TempDir dir_;
};

TEST_F(PresetResolve, BadValuesNameTheKey) {
  for (const char* key : {"mixer_norm_eps", "mlp_norm_eps", "norm_f_eps", "amor.norm_eps",
                          "mamba2.norm_eps", "gdn.norm_eps"}) {
    const std::string line = "  model." + std::string(key) + ": -1.0e-6\n";
    const std::string msg = config_error([&] { run(line); });
    EXPECT_NE(msg.find("key 'model." + std::string(key) + "'"), std::string::npos) << msg;
  }
  std::string msg = config_error([&] { run("  model.mamba2.init: xavier\n"); });
  EXPECT_NE(msg.find("model.mamba2.init"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mamba_ssm"), std::string::npos) << msg;  // the choices
  msg = config_error([&] { run("  model.gdn.init: fla\n"); });
  EXPECT_NE(msg.find("model.gdn.init"), std::string::npos) << msg;
}

TEST_F(PresetResolve, PresetsFillTheAuthorsValuesUnlessSet) {
  const model::ModelConfig m =
      run("  model: {preset: amor-180m, amor: {backbone: mamba2}}\n").config.model;
  EXPECT_EQ(m.mlp_norm_eps, 1e-6);
  EXPECT_EQ(m.amor.norm_eps, 1e-6);
  EXPECT_EQ(m.mixer_norm_eps, 1e-5);
  EXPECT_EQ(m.mamba2.init, "hf");
  const model::ModelConfig own =
      run("  model: {preset: amor-180m, amor: {backbone: mamba2}, mlp_norm_eps: 1.0e-4,\n"
          "          mamba2: {init: mamba_ssm}}\n")
          .config.model;
  EXPECT_EQ(own.mlp_norm_eps, 1e-4);
  EXPECT_EQ(own.mamba2.init, "mamba_ssm");
  EXPECT_EQ(own.amor.norm_eps, 1e-6);  // the keys it did not set still come from the preset
  const model::ModelConfig gdn = run("  model: {preset: gdn-440m}\n").config.model;
  EXPECT_EQ(gdn.mixer_norm_eps, 1e-6);
  EXPECT_EQ(gdn.norm_f_eps, 1e-6);
}

TEST_F(PresetResolve, NewKeysAtTheirDefaultsKeepTheHash) {
  const config::RunSpec plain = run("  model: {vocab: 260, kind: mamba2}\n");
  for (const char* key : {"mixer_norm_eps", "mlp_norm_eps", "norm_f_eps", "init"})
    EXPECT_EQ(plain.canonical.find("\"" + std::string(key) + "\""), std::string::npos) << key;
  // "norm_eps" only as model.norm_eps and model.gdn.norm_eps, which were there before
  size_t n = 0;
  for (size_t at = plain.canonical.find("\"norm_eps\""); at != std::string::npos;
       at = plain.canonical.find("\"norm_eps\"", at + 1))
    ++n;
  EXPECT_EQ(n, 2u);
  // Set explicitly to their defaults: the same run.
  const config::RunSpec same = run(
      "  model: {vocab: 260, kind: mamba2, mlp_norm_eps: 0.0,\n"
      "          mamba2: {init: mamba_ssm, norm_eps: 0.0}, gdn: {init: fla_layer},\n"
      "          amor: {norm_eps: 0.0}}\n");
  EXPECT_EQ(same.canonical, plain.canonical);
  EXPECT_EQ(same.hash8, plain.hash8);
  // Any other value is in the text and the hash.
  const config::RunSpec other = run("  model: {vocab: 260, kind: mamba2, mlp_norm_eps: 1.0e-6}\n");
  EXPECT_NE(other.canonical.find("\"mlp_norm_eps\": 1e-06"), std::string::npos);
  EXPECT_NE(other.hash8, plain.hash8);
  const config::RunSpec hf = run("  model: {vocab: 260, kind: mamba2, mamba2: {init: hf}}\n");
  EXPECT_NE(hf.canonical.find("\"init\": \"hf\""), std::string::npos);
  EXPECT_NE(hf.hash8, plain.hash8);
}

}  // namespace
}  // namespace amor
