// check_model_shapes: a run whose model cannot be built or cannot fit is refused at expansion,
// before anything is created, with the file, line and key (issue #17 §1).
#include <gtest/gtest.h>

#include <climits>

#include "models/presets/param_count.h"
#include "runner/app/preset_resolve.h"
#include "runner/config/config_test_util.h"
#include "runner/config/sweep.h"

namespace amor {
namespace {

using config::testing::TempDir;

class ModelShapes : public ::testing::Test {
 protected:
  // The message expanding (the declared ranges: sizes up to 2^40) and check_model_shapes give for
  // the single run of a sweep file with this base (YAML lines under "base:"), "" when it passes.
  // Prefix checked: "<file>:<line>: key '<key>': ".
  std::string check(const std::string& base_lines) {
    file_ = dir_.write("s.yaml", "name: s\nbase:\n" + base_lines);
    config::ExpandOptions eo;
    eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) {
      apply_model_preset(cfg, set_at);
    };
    try {
      auto runs = config::expand_sweep({file_}, {}, eo);
      EXPECT_EQ(runs.size(), 1u);
      check_model_shapes(runs.at(0));
    } catch (const config::ConfigError& e) {
      return e.what();
    }
    return "";
  }
  void expect_refused(const std::string& base_lines, int line, const std::string& key,
                      const std::string& also = "") {
    const std::string msg = check(base_lines);
    const std::string want = file_ + ":" + std::to_string(line) + ": key '" + key + "': ";
    EXPECT_EQ(msg.substr(0, want.size()), want) << base_lines << "\n -> " << msg;
    if (!also.empty()) EXPECT_NE(msg.find(also), std::string::npos) << msg;
  }
  TempDir dir_;
  std::string file_;
};

TEST_F(ModelShapes, HeadsThatDoNotDivideTheWidth) {
  expect_refused("  model:\n    kind: transformer\n    d_model: 100\n    vocab: 260\n", 5, "model.d_model",
                 "not a multiple of head_dim 64");
  expect_refused("  model:\n    kind: transformer\n    d_model: 2048\n    n_kv_heads: 3\n    vocab: 260\n", 6,
                 "model.n_kv_heads", "n_kv_heads 3");
  expect_refused("  model:\n    kind: oryx\n    d_model: 100\n    vocab: 260\n", 5, "model.d_model");
  EXPECT_EQ(check("  model:\n    kind: transformer\n    d_model: 128\n    n_kv_heads: 1\n    vocab: 260\n"), "");
}

TEST_F(ModelShapes, SizesThatOverflowOrCannotFit) {
  expect_refused("  model:\n    kind: mamba2\n    mamba2:\n      d_state: 2305843009213693952\n    vocab: 260\n", 6,
                 "model.mamba2.d_state", "must be in [1, 2^40], got 2305843009213693952");
  expect_refused("  model:\n    kind: mamba2\n    mamba2:\n      expand: 4611686018427387904\n    vocab: 260\n", 6,
                 "model.mamba2.expand");
  expect_refused("  train:\n    micro_batch: 4611686018427387904\n  model:\n    vocab: 260\n", 4, "train.micro_batch");
  expect_refused("  model:\n    n_layers: 100000000\n    vocab: 260\n", 4, "model.n_layers");
  // in range one by one, but 1e13 parameters together
  expect_refused("  model:\n    d_model: 1048576\n    n_layers: 16384\n    d_ff: 0\n    vocab: 260\n", 4,
                 "model.d_model", "parameters");
  // a model that fits, with activations that do not (1 TiB per rank)
  expect_refused("  train:\n    micro_batch: 1000000\n  data:\n    seq_len: 4096\n  model:\n    vocab: 260\n", 4,
                 "train.micro_batch", "per rank");
}

TEST(ParamCount, OverflowingSizesAreErrorsNeverNegativeCounts) {
  model::ModelConfig c;
  c.kind = "mamba2";
  c.mamba2.d_state = int64_t{1} << 61;
  EXPECT_THROW(model::count_parameters(c), Error);
  c = {};
  c.kind = "mamba2";
  c.mamba2.expand = int64_t{1} << 62;
  EXPECT_THROW(model::count_parameters(c), Error);
  c = {};
  c.kind = "transformer";
  c.d_model = int64_t{1} << 40;
  c.head_dim = int64_t{1} << 20;
  c.n_layers = 1 << 20;
  EXPECT_THROW(model::count_parameters(c), Error);  // beyond 64 bits: refused, not wrapped
  c = {};
  c.kind = "transformer";
  c.d_model = int64_t{1} << 20;
  c.head_dim = 64;
  c.n_layers = 4;
  EXPECT_GT(model::count_parameters(c), int64_t{1} << 40);  // beyond 32 bits, positive
}

}  // namespace
}  // namespace amor
