// Tests of sweep expansion: grid, zip, seeds and their order, includes, dotted keys, overrides,
// run names, and names/hashes that stay the same across invocations and checkouts.
#include <gtest/gtest.h>

#include "runner/config/canonical.h"
#include "runner/config/config_test_util.h"
#include "runner/config/run_name.h"
#include "runner/config/sweep.h"
#include "models/lm/model_kinds.h"

namespace amor::config {
namespace {

// These tests are about names, hashes and order of runs with the default model.vocab (256), which
// expand_sweep refuses for corpus runs (config_errors_test): that check is left out here.
std::vector<RunSpec> expand(const std::vector<std::string>& paths,
                            const std::vector<std::string>& overrides, ExpandOptions options = {}) {
  options.check_tokenizer_vocab = false;
  return expand_sweep(paths, overrides, options);
}

using testing::config_error;
using testing::TempDir;

std::vector<std::string> names(const std::vector<RunSpec>& runs) {
  std::vector<std::string> out;
  for (const RunSpec& r : runs) out.push_back(r.name);
  return out;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(ConfigSweep, GridIsACartesianProductInFileOrder) {
  TempDir dir;
  std::string f = dir.write("g.yaml",
                            "name: g\n"
                            "base: {train.steps: 5, model: {n_layers: 3}}\n"
                            "sweep:\n"
                            "  grid:\n"
                            "    model.kind: [transformer, amor]\n"
                            "    model.d_model: [64, 128]\n");
  auto runs = expand({f}, {});
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(names(runs), (std::vector<std::string>{"transformer-d_model64", "transformer-d_model128",
                                                   "amor-d_model64", "amor-d_model128"}));
  EXPECT_EQ(runs[2].config.model.kind, "amor");
  EXPECT_EQ(runs[2].config.model.d_model, 64);
  EXPECT_EQ(runs[1].overrides, (Pairs{{"model.kind", "transformer"}, {"model.d_model", "128"}}));
  for (const RunSpec& r : runs) {
    EXPECT_EQ(r.sweep, "g");
    EXPECT_EQ(r.sweep_file, f);
    EXPECT_EQ(r.config.train.steps, 5);       // base
    EXPECT_EQ(r.config.model.n_layers, 3);
    EXPECT_EQ(r.config.train.lr, 1e-3);       // default
    EXPECT_EQ(r.canonical, canonical_json(r.config));
    EXPECT_EQ(r.hash8, hash8(r.canonical));
    EXPECT_EQ(r.dir("results"), std::filesystem::path("results/g/" + r.name + "-" + r.hash8));
  }
  EXPECT_EQ(runs[3].set_at.at("model.d_model").str(), f + ":6");  // where the swept value is
  EXPECT_EQ(runs[3].set_at.at("train.steps").str(), f + ":2");
}

TEST(ConfigSweep, ZipPairsAndSeedsComeLast) {
  TempDir dir;
  std::string f = dir.write("z.yaml",
                            "name: z\n"
                            "sweep:\n"
                            "  seeds: [0, 7]\n"
                            "  zip:\n"
                            "    train.lr: [1e-3, 5e-4]\n"
                            "    train.warmup_steps: [10, 20]\n"
                            "  grid:\n"
                            "    model.kind: [gdn, mamba2]\n");
  auto runs = expand({f}, {});
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(names(runs), (std::vector<std::string>{
                             "gdn-lr0.001-warmup_steps10-seed0", "gdn-lr0.001-warmup_steps10-seed7",
                             "gdn-lr0.0005-warmup_steps20-seed0",
                             "gdn-lr0.0005-warmup_steps20-seed7",
                             "mamba2-lr0.001-warmup_steps10-seed0",
                             "mamba2-lr0.001-warmup_steps10-seed7",
                             "mamba2-lr0.0005-warmup_steps20-seed0",
                             "mamba2-lr0.0005-warmup_steps20-seed7"}));
  EXPECT_EQ(runs[3].config.train.lr, 5e-4);
  EXPECT_EQ(runs[3].config.train.warmup_steps, 20);
  EXPECT_EQ(runs[3].config.train.seed, 7);
  EXPECT_EQ(runs[3].overrides, (Pairs{{"model.kind", "gdn"},
                                      {"train.lr", "0.0005"},
                                      {"train.warmup_steps", "20"},
                                      {"train.seed", "7"}}));
}

TEST(ConfigSweep, NoSweepIsOneRunAndSeedsAlone) {
  TempDir dir;
  auto one = expand({dir.write("one.yaml", "name: one\nbase: {train.lr: 0.01}\n")}, {});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "base");
  EXPECT_TRUE(one[0].overrides.empty());
  EXPECT_EQ(one[0].config.train.lr, 0.01);

  auto seeds = expand({dir.write("s.yaml", "name: s\nsweep: {seeds: [3, 1]}\n")}, {});
  EXPECT_EQ(names(seeds), (std::vector<std::string>{"seed3", "seed1"}));
  EXPECT_EQ(seeds[1].config.train.seed, 1);
}

TEST(ConfigSweep, DottedAndNestedKeysInBaseAndSweep) {
  TempDir dir;
  std::string f = dir.write("d.yaml",
                            "name: d\n"
                            "base:\n"
                            "  model: {kind: amor, amor.backbone: mamba2}\n"
                            "  model.amor: {blocks: 1}\n"
                            "sweep:\n"
                            "  grid:\n"
                            "    model: {amor: {kappa: [0.1, 0.3]}}\n"
                            "    model.mamba2.d_state: [16]\n");
  auto runs = expand({f}, {});
  EXPECT_EQ(names(runs), (std::vector<std::string>{"kappa0.1-d_state16", "kappa0.3-d_state16"}));
  EXPECT_EQ(runs[1].config.model.amor.kappa, 0.3);
  EXPECT_EQ(runs[1].config.model.amor.backbone, "mamba2");
  EXPECT_EQ(runs[1].config.model.amor.blocks, 1);
  EXPECT_EQ(runs[1].config.model.mamba2.d_state, 16);
}

TEST(ConfigSweep, IncludesMergeDepthFirstBeforeBase) {
  TempDir dir;
  dir.write("common/deep.yaml", "base: {model.d_model: 16, train.lr: 0.5, model.kind: transformer}\n");
  dir.write("common/model.yaml",
            "description: shared model\n"
            "include: [deep.yaml]\n"  // relative to common/
            "base: {model.d_model: 32, train.steps: 10, model.kind: gdn}\n");
  dir.write("other.yaml", "include: common/deep.yaml\nbase: {model.kind: mamba2}\n");
  std::string f = dir.write("main.yaml",
                            "name: inc\n"
                            "include: [common/model.yaml, other.yaml]\n"
                            "base: {train.steps: 20}\n");
  auto runs = expand({f}, {});
  ASSERT_EQ(runs.size(), 1u);
  const RunConfig& c = runs[0].config;
  // deep (d_model 16, lr, transformer) < model (32, steps 10, gdn) < deep again (via other) <
  // other (mamba2) < main (steps 20): later wins.
  EXPECT_EQ(c.model.d_model, 16);
  EXPECT_EQ(c.train.lr, 0.5);
  EXPECT_EQ(c.model.kind, "mamba2");
  EXPECT_EQ(c.train.steps, 20);
  EXPECT_EQ(runs[0].set_at.at("model.d_model").str(), dir.path("common/deep.yaml") + ":1");
  EXPECT_EQ(runs[0].set_at.at("model.kind").str(), dir.path("other.yaml") + ":2");
}

TEST(ConfigSweep, IncludeCyclesAreErrors) {
  TempDir dir;
  std::string a = dir.write("a.yaml", "name: a\ninclude: [b.yaml]\n");
  dir.write("b.yaml", "base: {}\ninclude:\n  - sub/../a.yaml\n");
  EXPECT_EQ(config_error([&] { expand({a}, {}); }),
            dir.path("b.yaml") + ":3: include 'sub/../a.yaml': include cycle: " + a + " -> " +
                dir.path("b.yaml") + " -> " + a);
  std::string self = dir.write("self.yaml", "name: self\ninclude: self.yaml\n");
  EXPECT_EQ(config_error([&] { expand({self}, {}); }),
            self + ":2: include 'self.yaml': include cycle: " + self + " -> " + self);
  // The same file twice, not in a cycle, is fine.
  dir.write("x.yaml", "base: {train.steps: 2}\n");
  std::string twice = dir.write("twice.yaml", "name: t\ninclude: [x.yaml, x.yaml]\n");
  EXPECT_EQ(expand({twice}, {})[0].config.train.steps, 2);
}

TEST(ConfigSweep, OverridesApplyToEveryRunAfterTheSweep) {
  TempDir dir;
  std::string f = dir.write("o.yaml",
                            "name: o\n"
                            "base: {train.steps: 100, data.path: corpus.txt}\n"
                            "sweep: {grid: {model.kind: [gdn, amor]}}\n");
  auto runs = expand(
      {f}, {"train.steps=3", "eval.tasks=[mqar, lambada]", "data.path=", "model={d_model: 48}",
            "train.lr=4e-3"});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(names(runs), (std::vector<std::string>{"gdn", "amor"}));
  for (const RunSpec& r : runs) {
    EXPECT_EQ(r.config.train.steps, 3);
    EXPECT_EQ(r.config.eval.tasks, (std::vector<std::string>{"mqar", "lambada"}));
    EXPECT_EQ(r.config.data.path, "");
    EXPECT_EQ(r.config.model.d_model, 48);
    EXPECT_EQ(r.config.train.lr, 4e-3);
    EXPECT_EQ(r.set_at.at("train.steps").str(), "override 'train.steps=3'");
  }
  EXPECT_EQ(runs[1].overrides, (Pairs{{"model.kind", "amor"},
                                      {"train.steps", "3"},
                                      {"eval.tasks", "[mqar, lambada]"},
                                      {"data.path", ""},
                                      {"model.d_model", "48"},
                                      {"train.lr", "0.004"}}));
  // A key given twice is refused (config_errors_test checks the message).
  EXPECT_THROW(expand({f}, {"train.lr=2e-3", "train.lr=4e-3"}), std::exception);
  // The overrides change the config, so the hash, not the name.
  auto plain = expand({f}, {});
  EXPECT_EQ(plain[1].name, runs[1].name);
  EXPECT_NE(plain[1].hash8, runs[1].hash8);
}

TEST(ConfigSweep, OverridingASweptKeyCollapsesItsAxis) {
  TempDir dir;
  std::string f = dir.write("c.yaml",
                            "name: c\n"
                            "sweep:\n"
                            "  grid: {model.kind: [gdn, amor], model.d_model: [64, 128]}\n"
                            "  zip: {train.lr: [0.1, 0.2], train.steps: [5, 6]}\n");
  auto runs = expand({f}, {"model.d_model=32", "train.lr=0.5"});
  EXPECT_EQ(names(runs), (std::vector<std::string>{"gdn-steps5", "gdn-steps6", "amor-steps5",
                                                   "amor-steps6"}));
  for (const RunSpec& r : runs) {
    EXPECT_EQ(r.config.model.d_model, 32);
    EXPECT_EQ(r.config.train.lr, 0.5);
  }
  EXPECT_EQ(runs[3].overrides, (Pairs{{"model.kind", "amor"},
                                      {"train.steps", "6"},
                                      {"model.d_model", "32"},
                                      {"train.lr", "0.5"}}));
}

TEST(ConfigSweep, NamesAndHashesAreStable) {
  const std::string text =
      "name: stable\n"
      "base: {train.steps: 50}\n"
      "sweep: {grid: {model.kind: [gdn, amor]}, seeds: [1]}\n";
  TempDir a, b;
  auto first = expand({a.write("s.yaml", text)}, {});
  auto again = expand({a.path("s.yaml")}, {});
  auto elsewhere = expand({b.write("deeper/other-name.yaml", text)}, {});
  ASSERT_EQ(first.size(), 2u);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].id(), again[i].id());
    EXPECT_EQ(first[i].id(), elsewhere[i].id());  // neither the path nor the file name matter
    EXPECT_EQ(first[i].canonical, elsewhere[i].canonical);
  }
  // Pinned once: this id must not change between versions, platforms or checkouts (only a
  // deliberate schema/default change may move it).
  EXPECT_EQ(first[1].id(), "amor-seed1-" + hash8(first[1].canonical));
  EXPECT_EQ(first[1].hash8, "d1aba07e");
}

TEST(ConfigSweep, NamePartsForEachType) {
  TempDir dir;
  std::string f = dir.write("n.yaml",
                            "name: n\n"
                            "base: {model.kind: serial}\n"  // reads pattern and mamba2.*
                            "sweep:\n"
                            "  grid:\n"
                            "    model.recompute: [true, false]\n"
                            "    model.pattern: [MMA]\n"
                            "    eval.tasks: [[a, b], []]\n"
                            "    checkpoint.signal: ['']\n"
                            "    data.path: ['x/y z']\n"
                            "    model.head_dim: [32]\n"
                            "    model.mamba2.head_dim: [16]\n"
                            "    model.amor.m_init: [-0.5]\n");
  auto runs = expand({f}, {});
  EXPECT_EQ(names(runs),
            (std::vector<std::string>{
                "recompute-pattern_MMA-tasks_a+b-signal_none-path_x_y_z-model.head_dim32-"
                "mamba2.head_dim16",
                "recompute-pattern_MMA-tasks_none-signal_none-path_x_y_z-model.head_dim32-"
                "mamba2.head_dim16",
                "no_recompute-pattern_MMA-tasks_a+b-signal_none-path_x_y_z-model.head_dim32-"
                "mamba2.head_dim16",
                "no_recompute-pattern_MMA-tasks_none-signal_none-path_x_y_z-model.head_dim32-"
                "mamba2.head_dim16"}));
  // model.amor.m_init names no run of a serial model (it reads no model.amor.* key), and its
  // short name still counts for others': an amor run's m_init part (negative number).
  auto amor = expand({f}, {"model.kind=amor", "model.pattern="});
  EXPECT_EQ(amor[0].name, "recompute-tasks_a+b-signal_none-path_x_y_z-model.head_dim32-"
                          "mamba2.head_dim16-m_init-0.5");
  EXPECT_EQ(short_names({"a.b.c", "x.b.c", "d"}), (std::vector<std::string>{"a.b.c", "x.b.c", "d"}));
  EXPECT_EQ(sanitize_name(".hidden/dir"), "_hidden_dir");
  EXPECT_EQ(join_run_name({std::string(300, 'x')}).size(), 200u);
}

TEST(ConfigSweep, SeveralFilesAndTheResolveHook) {
  TempDir dir;
  std::string a = dir.write("a.yaml", "name: a\nsweep: {seeds: [0, 1]}\n");
  std::string b = dir.write("b.yaml", "name: b\nbase: {model.preset: small, model.d_model: 80}\n");
  std::string c = dir.write("c.yaml", "name: c\nbase: {model.preset: small}\n");
  // A stand-in for the preset table: fills d_model unless a file set it.
  ExpandOptions options;
  options.resolve = [](RunConfig& cfg, const KeyLocations& set_at) {
    if (cfg.model.preset == "small" && !set_at.count("model.d_model")) cfg.model.d_model = 96;
  };
  auto runs = expand({a, b, c, a}, {}, options);  // a twice: listed once
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].sweep, "a");
  EXPECT_EQ(runs[2].sweep, "b");
  EXPECT_EQ(runs[2].config.model.d_model, 80);
  EXPECT_EQ(runs[3].config.model.d_model, 96);  // the hash covers what the hook filled in
  EXPECT_EQ(runs[3].hash8, hash8(canonical_json(runs[3].config)));
}

// Issue #16 §4: a key the run's model does not read names nothing; the hash is unchanged (it is
// of the whole config, unused keys included).
TEST(ConfigSweep, KeysTheModelDoesNotReadDoNotNameItsRuns) {
  TempDir dir;
  std::string f = dir.write("u.yaml",
                            "name: u\n"
                            "sweep:\n"
                            "  grid: {data.source: [mqar, corpus]}\n"
                            "  zip:\n"
                            "    model.kind:          [transformer, mamba2, amor, amor]\n"
                            "    model.amor.backbone: [gdn,         gdn,    gdn,  mamba2]\n");
  auto runs = expand({f}, {});
  EXPECT_EQ(names(runs), (std::vector<std::string>{"mqar-transformer", "mqar-mamba2", "mqar-amor-gdn",
                                                   "mqar-amor-mamba2", "corpus-transformer",
                                                   "corpus-mamba2", "corpus-amor-gdn",
                                                   "corpus-amor-mamba2"}));
  // Still listed among the run's overrides (index.csv's key columns, --dry-run).
  EXPECT_EQ(runs[0].overrides, (Pairs{{"data.source", "mqar"}, {"model.kind", "transformer"},
                                      {"model.amor.backbone", "gdn"}}));
  EXPECT_TRUE(model::kind_uses_key("amor", "amor.kappa"));
  EXPECT_FALSE(model::kind_uses_key("gdn", "amor.kappa"));
  EXPECT_FALSE(model::kind_uses_key("transformer", "pattern"));
  EXPECT_TRUE(model::kind_uses_key("serial", "pattern"));
  EXPECT_FALSE(model::kind_uses_key("amor", "fused_linear"));
  EXPECT_TRUE(model::kind_uses_key("fused", "fused_linear"));
  EXPECT_FALSE(model::kind_uses_key("mamba2", "gdn.chunk"));
  EXPECT_TRUE(model::kind_uses_key("mamba2", "d_model"));

  // Two runs that differ only in a key their model does not read: the same model twice.
  std::string g = dir.write("dup.yaml",
                            "name: dup\n"
                            "sweep:\n"
                            "  grid: {model.kind: [gdn, amor], model.amor.kappa: [0.1, 0.2]}\n");
  EXPECT_EQ(config_error([&] { expand({g}, {}); }),
            g + ": sweep 'dup': two runs named 'gdn' differ only in model.amor.kappa, which "
                "model.kind gdn does not use (the same model trained twice); sweep such keys only "
                "with the kinds that use them (sweep.variants)");
}

TEST(ConfigSweep, VariantsAreOverrideSetsCrossedWithGridAndSeeds) {
  TempDir dir;
  std::string f = dir.write("v.yaml",
                            "name: v\n"
                            "base: {model.amor.kappa: 0.2}\n"
                            "sweep:\n"
                            "  seeds: [0, 1]\n"
                            "  grid: {train.lr: [0.001, 0.002]}\n"
                            "  variants:\n"
                            "    - {model.kind: gdn}\n"
                            "    - name: amor-k3\n"
                            "      model: {kind: amor, amor.kappa: 0.3}\n"
                            "    - {model.kind: amor, model.amor.backbone: mamba2}\n");
  auto runs = expand({f}, {});
  ASSERT_EQ(runs.size(), 12u);
  // Variants are the slowest axis and the first part of the names.
  EXPECT_EQ(runs[0].name, "gdn-lr0.001-seed0");
  EXPECT_EQ(runs[3].name, "gdn-lr0.002-seed1");
  EXPECT_EQ(runs[4].name, "amor-k3-lr0.001-seed0");
  EXPECT_EQ(runs[8].name, "amor-mamba2-lr0.001-seed0");
  EXPECT_EQ(runs[0].config.model.amor.kappa, 0.2);  // a key a variant does not set keeps the base
  EXPECT_EQ(runs[4].config.model.amor.kappa, 0.3);
  EXPECT_EQ(runs[8].config.model.amor.backbone, "mamba2");
  EXPECT_EQ(runs[8].config.model.amor.kappa, 0.2);
  EXPECT_EQ(runs[4].overrides, (Pairs{{"model.kind", "amor"}, {"model.amor.kappa", "0.3"},
                                      {"train.lr", "0.001"}, {"train.seed", "0"}}));
  // Overriding a variant's key on the command line takes it out of the names.
  auto o = expand({f}, {"model.amor.backbone=gdn", "train.seed=3"});
  EXPECT_EQ(names(o), (std::vector<std::string>{"gdn-lr0.001", "gdn-lr0.002", "amor-k3-lr0.001",
                                                "amor-k3-lr0.002", "amor-lr0.001", "amor-lr0.002"}));
}

TEST(ConfigSweep, VariantsExpandToTheSameRunsAsTheZipTheyReplace) {
  TempDir dir;
  std::string zip = dir.write("z.yaml",
                              "name: t\n"
                              "base: {model.n_layers: 3}\n"
                              "sweep:\n"
                              "  zip:\n"
                              "    model.kind:         [gdn, serial, fused, serial]\n"
                              "    model.pattern:      [GGA, MMA,    GGA,   GGA]\n"
                              "    model.fused_linear: [gdn, mamba2, gdn,   gdn]\n");
  std::string var = dir.write("v.yaml",
                              "name: t\n"
                              "base: {model.n_layers: 3, model.pattern: GGA, model.fused_linear: gdn}\n"
                              "sweep:\n"
                              "  variants:\n"
                              "    - {model.kind: gdn}\n"
                              "    - {model.kind: serial, model.pattern: MMA, model.fused_linear: mamba2}\n"
                              "    - {model.kind: fused}\n"
                              "    - {model.kind: serial}\n");
  auto a = expand({zip}, {}), b = expand({var}, {});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].hash8, b[i].hash8) << i;
  EXPECT_EQ(names(a), (std::vector<std::string>{"gdn", "serial-pattern_MMA", "fused-gdn",
                                                "serial-pattern_GGA"}));
  EXPECT_EQ(names(b), (std::vector<std::string>{"gdn", "serial-pattern_MMA", "fused",
                                                "serial"}));
}

TEST(ConfigSweep, VariantErrorsNameFileLineAndKey) {
  TempDir dir;
  auto err = [&](const std::string& sweep) {
    std::string f = dir.write("e.yaml", "name: e\nsweep:\n" + sweep);
    std::string msg = config_error([&] { expand({f}, {}); });
    return msg.substr(msg.find("e.yaml:") + 7);
  };
  EXPECT_EQ(err("  variants: {model.kind: gdn}\n"),
            "3: key 'sweep.variants': expected a list of override sets ({key: value, ...}), got a mapping");
  EXPECT_EQ(err("  variants: []\n"), "3: key 'sweep.variants': empty list (give at least one override set)");
  EXPECT_EQ(err("  variants:\n    - {model.kind: gdn}\n    - {model.knd: amor}\n"),
            "5: sweep.variants item 2: unknown key 'model.knd' (did you mean 'model.kind'?)");
  EXPECT_EQ(err("  variants:\n    - {model.kind: gdn}\n    - model.kind: [amor]\n"),
            "5: sweep.variants item 2: key 'model.kind': expected one of transformer, mamba2, gdn, "
            "serial, fused, amor, oryx, got a list");
  EXPECT_EQ(err("  variants:\n    - {model.kind: gdn}\n    - {model.kind: gdn}\n"),
            "5: sweep.variants item 2: repeats item 1 (the same keys set to the same values)");
  EXPECT_EQ(err("  variants:\n    - {name: a, model.kind: gdn}\n    - {name: a, model.kind: amor}\n"),
            "5: sweep.variants item 2: name 'a' is already used (at " + dir.path() + "/e.yaml:4)");
  EXPECT_EQ(err("  variants:\n    - {name: a/b, model.kind: gdn}\n"),
            "4: sweep.variants item 1: key 'name': expected a run name part of letters, digits, "
            "'_', '.', '+', '-' (at most 100 bytes, not starting with '.'), got 'a/b'");
  EXPECT_EQ(err("  variants:\n    - model.kind: gdn\n      model: {kind: amor}\n"),
            "5: sweep.variants item 1: key 'model.kind' is set twice (first at " + dir.path() +
                "/e.yaml:4)");
  EXPECT_EQ(err("  variants:\n    - {model.kind: gdn}\n  grid: {model.kind: [amor]}\n"),
            "5: sweep.grid: key 'model.kind' is already swept in sweep.variants (" + dir.path() +
                "/e.yaml:4)");
}

}  // namespace
}  // namespace amor::config
