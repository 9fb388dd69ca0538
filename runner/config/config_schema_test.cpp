// Tests of the run-config schema: defaults, nested and dotted keys, value typing and every
// bad-value message (file, line, key).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "runner/config/canonical.h"
#include "runner/config/config_test_util.h"
#include "runner/config/schema.h"

namespace amor::config {
namespace {

using testing::config_error;

RunConfig load(const std::string& yaml) { return load_run_config_yaml(yaml, "cfg.yaml"); }
std::string error(const std::string& yaml) {
  return config_error([&] { load(yaml); });
}

TEST(ConfigSchema, EmptyMappingGivesDefaults) {
  RunConfig c = load("{}");
  RunConfig d;
  for (const Field& f : fields()) {
    if (f.key == "train.dtype") continue;  // "auto" resolves
    EXPECT_EQ(f.get(c), f.get(d)) << f.key;
  }
  EXPECT_EQ(c.train.dtype, "f32");
  EXPECT_EQ(c.data.seq_len, 256);
  EXPECT_EQ(c.train.lr, 1e-3);
  EXPECT_EQ(c.checkpoint.keep, 2);
  EXPECT_EQ(c.model.mamba2.d_state, 128);
  EXPECT_EQ(c.model.amor.kappa, 0.2);
  EXPECT_EQ(c.device, "cpu");
}

TEST(ConfigSchema, EveryModelConfigFieldIsAKey) {
  // One key per ModelConfig member (models/core/config.h), plus model.preset.
  for (const char* k :
       {"model.kind", "model.vocab", "model.d_model", "model.n_layers", "model.d_ff",
        "model.head_dim", "model.n_kv_heads", "model.rope_base", "model.norm_eps",
        "model.init_std", "model.pattern", "model.fused_linear", "model.vocab_chunk",
        "model.recompute", "model.preset", "model.mamba2.d_state", "model.mamba2.expand",
        "model.mamba2.head_dim", "model.mamba2.n_groups", "model.mamba2.conv_kernel",
        "model.mamba2.chunk", "model.mamba2.dt_min", "model.mamba2.dt_max",
        "model.mamba2.dt_floor", "model.mamba2.a_min", "model.mamba2.a_max", "model.gdn.head_dim",
        "model.gdn.qk_ratio", "model.gdn.v_expand", "model.gdn.conv_kernel", "model.gdn.chunk",
        "model.gdn.norm_eps", "model.gdn.dt_min", "model.gdn.dt_max", "model.gdn.dt_floor",
        "model.gdn.a_min", "model.gdn.a_max", "model.amor.backbone", "model.amor.blocks",
        "model.amor.residual_mode", "model.amor.offset_mode", "model.amor.kappa",
        "model.amor.momentum", "model.amor.m_init", "model.amor.s_init",
        "model.amor.fixed_offset", "model.oryx.linear", "model.oryx.chunk",
        "model.oryx.p_attention", "model.oryx.schedule", "model.mixer_norm_eps",
        "model.mlp_norm_eps", "model.norm_f_eps", "model.mamba2.norm_eps", "model.mamba2.init",
        "model.gdn.init", "model.amor.norm_eps"})
    EXPECT_NE(find_field(k), nullptr) << k;
  EXPECT_EQ(fields().size(), 132u);  // model 57, data 11, train 15, eval 44, checkpoint 3, 1, device
}

TEST(ConfigSchema, KeysReachTheirMembers) {
  RunConfig c = load(
      "model: {kind: amor, d_model: 96, recompute: true, amor: {kappa: 0.5, backbone: mamba2}}\n"
      "data: {source: mqar, mqar: {num_kv_pairs: 4, power_a: 0.1, layout: lm, random_filler: false, pair_targets: false}}\n"
      "train: {steps: 7, lr: 3e-4, seed: 5, dtype: f64}\n"
      "eval: {tasks: [mqar, lambada], max_examples: 9}\n"
      "checkpoint: {every: 3, keep: 1, signal: SIGUSR2}\n"
      "parallel: {ranks_per_run: 2}\n"
      "device: cpu\n");
  EXPECT_EQ(c.model.kind, "amor");
  EXPECT_EQ(c.model.d_model, 96);
  EXPECT_TRUE(c.model.recompute);
  EXPECT_EQ(c.model.amor.kappa, 0.5);
  EXPECT_EQ(c.model.amor.backbone, "mamba2");
  EXPECT_EQ(c.data.source, "mqar");
  EXPECT_EQ(c.data.mqar.num_kv_pairs, 4);
  EXPECT_EQ(c.data.mqar.power_a, 0.1);
  EXPECT_EQ(c.data.mqar.layout, "lm");
  EXPECT_FALSE(c.data.mqar.random_filler);
  EXPECT_FALSE(c.data.mqar.pair_targets);
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.train.lr, 3e-4);
  EXPECT_EQ(c.train.seed, 5);
  EXPECT_EQ(c.train.dtype, "f64");
  EXPECT_EQ(c.eval.tasks, (std::vector<std::string>{"mqar", "lambada"}));
  EXPECT_EQ(c.eval.max_examples, 9);
  EXPECT_EQ(c.checkpoint.every, 3);
  EXPECT_EQ(c.checkpoint.keep, 1);
  EXPECT_EQ(c.checkpoint.signal, "SIGUSR2");
  EXPECT_EQ(c.parallel.ranks_per_run, 2);
  const amor::model::ModelConfig& m = c.model;  // the model's own config, as models take it
  EXPECT_EQ(m.d_model, 96);
}

TEST(ConfigSchema, NestedAndDottedKeysAreTheSame) {
  for (const char* yaml : {"model: {amor: {kappa: 0.7}}", "model: {amor.kappa: 0.7}",
                           "model.amor: {kappa: 0.7}", "model.amor.kappa: 0.7"})
    EXPECT_EQ(load(yaml).model.amor.kappa, 0.7) << yaml;
}

TEST(ConfigSchema, ValueTyping) {
  EXPECT_EQ(load("train.steps: 1e4").train.steps, 10000);      // exact integer in exponent form
  EXPECT_EQ(load("train.steps: 2.5e1").train.steps, 25);
  EXPECT_EQ(load("train.lr: 3").train.lr, 3.0);                // integers are numbers
  EXPECT_EQ(load("train.lr: .5").train.lr, 0.5);
  EXPECT_EQ(load("train.lr: +1.5E-3").train.lr, 1.5e-3);
  EXPECT_EQ(load("model.recompute: True").model.recompute, true);
  EXPECT_EQ(load("model.pattern: 'MMA'").model.pattern, "MMA");
  EXPECT_EQ(load("data.tokenizer: 123").data.tokenizer, "123");  // any scalar is a string
  EXPECT_EQ(load("checkpoint.signal: ''").checkpoint.signal, "");
  EXPECT_TRUE(load("eval.tasks: []").eval.tasks.empty());
  EXPECT_EQ(load("train.seed: !!int 4").train.seed, 4);
}

TEST(ConfigSchema, WrongTypesNameFileLineAndKey) {
  EXPECT_EQ(error("train:\n  lr: fast\n"),
            "cfg.yaml:2: key 'train.lr': expected a number, got 'fast'");
  EXPECT_EQ(error("model.d_model: 64.5"),
            "cfg.yaml:1: key 'model.d_model': expected an integer, got '64.5'");
  EXPECT_EQ(error("model.d_model: \"64\""),
            "cfg.yaml:1: key 'model.d_model': expected an integer, got the quoted string \"64\"");
  EXPECT_EQ(error("model.d_model: 1.55e1"),
            "cfg.yaml:1: key 'model.d_model': expected an integer, got '1.55e1'");
  EXPECT_EQ(error("model.d_model: true"),
            "cfg.yaml:1: key 'model.d_model': expected an integer, got 'true'");
  EXPECT_EQ(error("model.d_model: [64]"),
            "cfg.yaml:1: key 'model.d_model': expected an integer, got a list");
  EXPECT_EQ(error("model.d_model: 99999999999999999999"),
            "cfg.yaml:1: key 'model.d_model': '99999999999999999999' is out of the 64-bit integer "
            "range");
  EXPECT_EQ(error("train.lr: .inf"), "cfg.yaml:1: key 'train.lr': expected a number, got '.inf'");
  EXPECT_EQ(error("train.lr: '1e-3'"),
            "cfg.yaml:1: key 'train.lr': expected a number, got the quoted string \"1e-3\"");
  EXPECT_EQ(error("model.recompute: yes"),
            "cfg.yaml:1: key 'model.recompute': expected true or false, got 'yes'");
  EXPECT_EQ(error("model:\n  recompute: 1\n"),
            "cfg.yaml:2: key 'model.recompute': expected true or false, got '1'");
  EXPECT_EQ(error("data:\n  path:\n"),
            "cfg.yaml:2: key 'data.path': expected a string, got nothing (null)");
  EXPECT_EQ(error("data.path: {a: 1}"),
            "cfg.yaml:1: key 'data.path': expected a string, got a mapping");
  EXPECT_EQ(error("eval.tasks: lambada"),
            "cfg.yaml:1: key 'eval.tasks': expected a list of strings, got 'lambada'");
  EXPECT_EQ(error("eval.tasks: [a, [b]]"),
            "cfg.yaml:1: key 'eval.tasks': item 2: expected a string, got a list");
}

TEST(ConfigSchema, EnumsListTheirValues) {
  EXPECT_EQ(error("\nmodel: {kind: amr}"),
            "cfg.yaml:2: key 'model.kind': expected one of transformer, mamba2, gdn, serial, "
            "fused, amor, oryx, got 'amr'");
  EXPECT_EQ(error("checkpoint.signal: SIGTERM"),
            "cfg.yaml:1: key 'checkpoint.signal': expected one of SIGUSR1, SIGUSR2, \"\", got "
            "'SIGTERM'");
  EXPECT_EQ(error("device: gpu"), "cfg.yaml:1: key 'device': expected one of cpu, cuda, got 'gpu'");
  EXPECT_EQ(error("data.source: 5"),
            "cfg.yaml:1: key 'data.source': expected one of corpus, mqar, shards, got '5'");
}

TEST(ConfigSchema, UnknownKeysAndSections) {
  EXPECT_EQ(error("model:\n  d_modle: 64\n"),
            "cfg.yaml:2: unknown key 'model.d_modle' (did you mean 'model.d_model'?)");
  EXPECT_EQ(error("d_model: 64"), "cfg.yaml:1: unknown key 'd_model' (did you mean "
                                  "'model.d_model'?)");
  EXPECT_EQ(error("model.amor.kapa: 1"),
            "cfg.yaml:1: unknown key 'model.amor.kapa' (did you mean 'model.amor.kappa'?)");
  EXPECT_EQ(error("optimizer: {lr: 1}"), "cfg.yaml:1: unknown key 'optimizer'");
  EXPECT_EQ(error("model: 5"),
            "cfg.yaml:1: key 'model': expected a mapping of model.* keys, got '5'");
  EXPECT_EQ(error("model:\n  amor: [1]\n"),
            "cfg.yaml:2: key 'model.amor': expected a mapping of model.amor.* keys, got a list");
  EXPECT_EQ(error("model.d_model: 64\nmodel: {d_model: 32}\n"),
            "cfg.yaml:2: key 'model.d_model' is set twice (first at cfg.yaml:1)");
}

TEST(ConfigSchema, RangesAndCharacters) {
  EXPECT_EQ(error("train.grad_accum: 0"),
            "cfg.yaml:1: key 'train.grad_accum': must be at least 1, got 0");
  // Sizes: at most 2^40 (n_layers 2^20), so that no product of sizes overflows.
  EXPECT_EQ(error("model.d_model: 0"),
            "cfg.yaml:1: key 'model.d_model': must be in [1, 2^40], got 0");
  EXPECT_EQ(error("model.d_model: 1099511627777"),
            "cfg.yaml:1: key 'model.d_model': must be in [1, 2^40], got 1099511627777");
  EXPECT_EQ(error("model.n_layers: 1048577"),
            "cfg.yaml:1: key 'model.n_layers': must be in [0, 2^20], got 1048577");
  EXPECT_EQ(error("train.beta2: 1.0"),
            "cfg.yaml:1: key 'train.beta2': must be in [0.0, 1.0), got 1.0");
  EXPECT_EQ(error("train.eps: 0"), "cfg.yaml:1: key 'train.eps': must be > 0.0, got 0.0");
  EXPECT_EQ(error("train.lr: -1"), "cfg.yaml:1: key 'train.lr': must be >= 0.0, got -1.0");
  EXPECT_EQ(error("model.pattern: MMXA"),
            "cfg.yaml:1: key 'model.pattern': 'MMXA' may only contain the letters AMG");
  EXPECT_EQ(error("eval.niah.depths: [0, 101]"),
            "cfg.yaml:1: key 'eval.niah.depths': item 2: must be in [0.0, 100.0], got 101.0");
  EXPECT_EQ(error("eval.niah.lengths: [4, 0]"),
            "cfg.yaml:1: key 'eval.niah.lengths': item 2: must be at least 1, got 0");
}

// Values the model constructors refused although the schema let them through, now refused by
// the declared ranges (models/core/config.h) with file, line and key.
TEST(ConfigSchema, RangesTheModelsNeed) {
  EXPECT_EQ(error("model.amor.blocks: 2"),
            "cfg.yaml:1: key 'model.amor.blocks': must be one of 1, 3, got 2");
  EXPECT_EQ(load("model.amor.blocks: 1").model.amor.blocks, 1);
  EXPECT_EQ(error("model.mamba2.dt_floor: 0"),
            "cfg.yaml:1: key 'model.mamba2.dt_floor': must be > 0.0, got 0.0");
  EXPECT_EQ(error("model.gdn.dt_floor: 0"),
            "cfg.yaml:1: key 'model.gdn.dt_floor': must be > 0.0, got 0.0");
  EXPECT_EQ(error("model.mamba2.a_min: 0"),
            "cfg.yaml:1: key 'model.mamba2.a_min': must be > 0.0, got 0.0");
  EXPECT_EQ(load("model.gdn.a_min: 0").model.gdn.a_min, 0.0);  // fla's range starts at 0
  // The Oryx schedule is checked by the model's own parser: keywords or a segment list.
  EXPECT_EQ(load("model.oryx.schedule: \"linear:512,attention:*\"").model.oryx.schedule,
            "linear:512,attention:*");
  EXPECT_EQ(load("model.oryx.schedule: prefill_linear_decode_attention").model.oryx.schedule,
            "prefill_linear_decode_attention");
  EXPECT_EQ(error("model.oryx.schedule: segments"),
            "cfg.yaml:1: key 'model.oryx.schedule': model.oryx.schedule \"segments\": segment 1 "
            "\"segments\" is not MODE:LEN; use attention, linear, prefill_linear_decode_attention "
            "or a segment list such as \"linear:512,attention:128,linear:*\"");
}

TEST(ConfigSchema, RulesBetweenKeys) {
  EXPECT_EQ(load("device: cuda").train.dtype, "bf16");
  EXPECT_EQ(error("train.steps: 1\ntrain.dtype: bf16\n"),
            "cfg.yaml:2: key 'train.dtype': bf16 needs device cuda (cpu runs f32 or f64)");
  EXPECT_EQ(error("device: cuda\ntrain.dtype: f64\n"),
            "cfg.yaml:2: key 'train.dtype': f64 is not available with device cuda (cuda runs "
            "bf16, or f32 to compare with the cpu)");
  EXPECT_EQ(error("model.kind: serial"),
            "cfg.yaml:1: key 'model.kind': model.kind serial needs model.pattern (e.g. MMMA)");
  EXPECT_EQ(error("data.mqar.pair_targets: false"),
            "cfg.yaml:1: key 'data.mqar.pair_targets': data.mqar.pair_targets false needs "
            "data.mqar.layout lm (Zoology's layout trains the queries only)");
  EXPECT_EQ(error("data.source: shards"),
            "cfg.yaml:1: key 'data.source': data.source shards needs data.path (the shards "
            "directory)");
  EXPECT_EQ(error("model.gdn.dt_min: 0.5"),
            "cfg.yaml:1: key 'model.gdn.dt_min': model.gdn.dt_min (0.5) must not exceed "
            "model.gdn.dt_max (0.1)");
  EXPECT_EQ(load("model.kind: serial\nmodel.pattern: GGA\n").model.pattern, "GGA");
}

TEST(ConfigSchema, BadDocuments) {
  EXPECT_EQ(error("[1, 2]"), "cfg.yaml: expected a mapping of run config keys, got a list");
  // yaml-cpp's own wording differs between versions; ours is the prefix.
  EXPECT_EQ(error("model: {d_model: [64}\n").substr(0, 33), "cfg.yaml:1: not valid YAML/JSON: ");
  EXPECT_EQ(config_error([] { load_run_config_json("{\"train\": {\"lr\": 1e-3,}}", "c.json"); })
                .substr(0, 7),
            "c.json:");
}

TEST(ConfigSchema, FormatValue) {
  EXPECT_EQ(format_value(FieldValue(int64_t{768})), "768");
  EXPECT_EQ(format_value(FieldValue(0.001)), "0.001");
  EXPECT_EQ(format_value(FieldValue(1e-8)), "1e-08");
  EXPECT_EQ(format_value(FieldValue(10000.0)), "10000.0");
  EXPECT_EQ(format_value(FieldValue(0.1 + 0.2)), "0.30000000000000004");
  EXPECT_EQ(format_value(FieldValue(0.0005)), "0.0005");
  EXPECT_EQ(format_value(FieldValue(-0.0)), "-0.0");
  EXPECT_EQ(format_value(FieldValue(true)), "true");
  EXPECT_EQ(format_value(FieldValue(std::vector<std::string>{"a", "b"})), "[a, b]");
  EXPECT_EQ(json_value(FieldValue(std::vector<std::string>{"a", "b\""})), "[\"a\", \"b\\\"\"]");
}

// format_double writes what Python's repr writes, checked against the interpreter itself on
// random bit patterns and on values researchers type.
TEST(ConfigSchema, FormatDoubleMatchesPythonRepr) {
  std::vector<double> values = {0.0, -0.0, 1.0, 0.1, 1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 123456.789,
                                5e-324, 1.7976931348623157e308, 2.5e-7, 3e-3, 10000.0, 1e22};
  std::mt19937_64 rng(42);
  while (values.size() < 2000) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(static_cast<double>(rng() % 100000) * std::pow(10.0, int(rng() % 30) - 15));
  }
  testing::TempDir dir;
  std::string in = dir.path("values.txt"), out = dir.path("repr.txt");
  {
    std::ofstream f(in);
    for (double d : values) f << fmt::format("{:a}\n", d);
  }
  std::string cmd = std::string(AMOR_PYTHON) +
                    " -c \"import sys; print('\\n'.join(repr(float.fromhex(l)) for l in "
                    "open(sys.argv[1]).read().split()))\" " + in + " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  std::string line;
  for (double d : values) {
    ASSERT_TRUE(std::getline(f, line));
    EXPECT_EQ(format_double(d), line) << fmt::format("{:a}", d);
  }
}

}  // namespace
}  // namespace amor::config
