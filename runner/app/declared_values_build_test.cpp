// The declared ranges are what the models accept: every model.* value at the edge of its
// declare_keys range (models/core/config.h), and every choice, either is refused before a run
// starts (by the schema, the rules between keys, or check_model_shapes, each naming file, line and
// key) or builds a model that runs a training step. A model constructor that refuses a value the
// declarations let through (as dt_floor 0 and amor.blocks 2 once were) fails here, so a value
// check cannot live only in a constructor (issue #17 §1).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "models/lm/language_model.h"
#include "runner/app/preset_resolve.h"
#include "runner/config/config_test_util.h"
#include "runner/config/schema.h"
#include "runner/config/sweep.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using config::testing::TempDir;

// Small models of every kind and variant: the values under test are set on top of these.
const char* const kBases[] = {
    "model: {kind: transformer}",
    "model: {kind: transformer, n_kv_heads: 1}",
    "model: {kind: mamba2}",
    "model: {kind: gdn}",
    "model: {kind: serial, pattern: AMG, n_layers: 3}",
    "model: {kind: fused, fused_linear: mamba2}",
    "model: {kind: fused, fused_linear: gdn}",
    "model: {kind: amor, amor: {backbone: gdn, blocks: 1}}",
    "model: {kind: amor, amor: {backbone: mamba2, offset_mode: fixed, residual_mode: h}}",
    "model: {kind: oryx, oryx: {linear: gdn}}",
    "model: {kind: oryx, oryx: {linear: mamba2}}",
};
const char* const kSmall =
    "base:\n"
    "  model: {vocab: 32, d_model: 16, n_layers: 2, d_ff: 16, head_dim: 8,\n"
    "          mamba2: {head_dim: 8, d_state: 4, chunk: 4}, gdn: {head_dim: 8, chunk: 4},\n"
    "          oryx: {chunk: 4}}\n"
    "  data: {source: mqar, seq_len: 8}\n"
    "  train: {micro_batch: 1}\n";

// The values at the edges of a key's declared range, and its choices, as YAML scalars.
std::vector<std::string> edge_values(const config::Field& f) {
  std::vector<std::string> out;
  const keys::Allowed& a = f.allowed;
  auto num = [&](double x) {
    out.push_back(f.type == config::FieldType::Int ? std::to_string(static_cast<int64_t>(x))
                                                   : config::format_double(x));
  };
  switch (f.type) {
    case config::FieldType::Int:
      if (!a.one_of.empty()) {
        out = keys::choice_list(a.one_of);
      } else if (!std::isinf(a.lo)) {
        num(a.lo + (a.lo_open ? 1 : 0));
        num(a.lo + (a.lo_open ? 2 : 1));
        num(3);  // odd, and not a divisor of the small sizes: a rule between keys must catch it
      }
      break;
    case config::FieldType::Float:
      if (!std::isinf(a.lo)) num(a.lo_open ? std::nextafter(a.lo, INFINITY) : a.lo);
      if (!std::isinf(a.lo)) num(a.lo_open ? 1e-6 : a.lo + 1e-6);
      num(0.3);
      if (!std::isinf(a.hi)) num(a.hi_open ? std::nextafter(a.hi, -INFINITY) : a.hi);
      if (std::isinf(a.lo)) num(-1.0);
      if (std::isinf(a.hi)) num(2.5);  // small: a large width factor makes a model of gigabytes
      break;
    case config::FieldType::Enum:
      for (const std::string& c : f.choices) out.push_back("\"" + c + "\"");
      break;
    case config::FieldType::Bool:
      out = {"true", "false"};
      break;
    default:
      break;
  }
  return out;
}

struct Outcome {
  bool refused = false;
  std::string error;  // the refusal, or what the model threw
};

// Through the same checks amor-run makes before it creates anything, then the model's own.
Outcome try_value(TempDir& dir, const std::string& base, const std::string& key,
                  const std::string& value) {
  const std::string file = dir.write("s.yaml", std::string("name: s\n") + kSmall + "  " + base +
                                                   "\n  " + key + ": " + value + "\n");
  config::ExpandOptions eo;
  eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) {
    apply_model_preset(cfg, set_at);
  };
  config::RunSpec run;
  try {
    run = config::expand_sweep({file}, {}, eo).at(0);
    check_model_shapes(run);
  } catch (const config::ConfigError& e) {
    return {true, e.what()};
  }
  try {
    const model::ModelConfig& m = run.config.model;
    auto lm = model::build_model(m, DType::F32);
    lm->params().initialize(1);
    const int64_t T = run.config.data.seq_len;
    model::Batch batch{testing::randint({2, T}, 2, m.vocab), testing::randint({2, T}, 3, m.vocab)};
    lm->params().zero_grad();
    model::StepOutput out = lm->forward(batch, true);
    lm->backward(Tensor::full<float>({2, T}, 1.0f / (2.0f * static_cast<float>(T))));
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
  return {};
}

TEST(DeclaredValues, AreRefusedUpFrontOrBuildAModelThatRuns) {
  TempDir dir;
  size_t built = 0, refused = 0;
  for (const config::Field& f : config::fields()) {
    if (f.key.rfind("model.", 0) != 0 || f.key == "model.kind" || f.key == "model.preset") continue;
    for (const std::string& v : edge_values(f)) {
      for (const char* base : kBases) {
        Outcome o = try_value(dir, base, f.key, v);
        EXPECT_TRUE(o.refused || o.error.empty())
            << f.key << ": " << v << " on " << base
            << " passes every check before the run, then the model refuses it: " << o.error;
        if (o.refused) {
          ++refused;
          // A refusal names the file, a line and a key.
          EXPECT_NE(o.error.find("s.yaml:"), std::string::npos) << o.error;
          EXPECT_NE(o.error.find("key '"), std::string::npos) << o.error;
        } else {
          ++built;
        }
      }
    }
  }
  EXPECT_GT(built, 500u);  // the edges mostly build; this is not a test of refusals alone
  std::printf("%zu edge values built and ran, %zu refused up front\n", built, refused);
}

}  // namespace
}  // namespace amor
