// Every bad sweep file and bad override, with the exact message: file, line and key.
#include <gtest/gtest.h>

#include "runner/config/config_test_util.h"
#include "runner/config/sweep.h"

namespace amor::config {
namespace {

using testing::config_error;
using testing::TempDir;

class ConfigErrors : public ::testing::Test {
 protected:
  // The message expanding a sweep file with this text gives; "F" in `expected` stands for the
  // file's path.
  void expect(const std::string& text, const std::string& expected,
              const std::vector<std::string>& overrides = {}) {
    std::string f = dir_.write("s.yaml", text);
    std::string want = expected;
    for (size_t at; (at = want.find("F:")) != std::string::npos;) want.replace(at, 1, f);
    EXPECT_EQ(config_error([&] { expand_sweep({f}, overrides); }), want) << text;
  }
  TempDir dir_;
};

TEST_F(ConfigErrors, Files) {
  std::string missing = dir_.path("missing.yaml");
  EXPECT_EQ(config_error([&] { expand_sweep({missing}, {}); }),
            missing + ": cannot read the file: No such file or directory");
  EXPECT_EQ(config_error([&] { expand_sweep({dir_.path()}, {}); }),
            dir_.path() + ": cannot read the file: it is a directory");
  expect("name: s\n\ninclude: [nope.yaml]\n",
         "F:3: include 'nope.yaml': cannot read " + dir_.path("nope.yaml") +
             ": No such file or directory");
  expect("", "F: empty file (expected a mapping with name, include, base, sweep)");
  expect("- 1\n- 2\n", "F:1: expected a mapping with name, include, base, sweep, got a list");
  // yaml-cpp's own wording differs between versions: check ours around it.
  std::string f = dir_.write("bad.yaml", "name: s\nbase: {a: [1}\n");
  std::string msg = config_error([&] { expand_sweep({f}, {}); });
  EXPECT_EQ(msg.substr(0, f.size() + 32), f + ":2: YAML syntax error at column ");
}

TEST_F(ConfigErrors, TopLevel) {
  expect("name: s\nbse: {}\n",
         "F:2: unknown key 'bse' (did you mean 'base'?); allowed here: name, description, "
         "include, base, sweep");
  expect("base: {}\n", "F: key 'name' is missing (every sweep file needs a name)");
  expect("name: my sweep\n",
         "F:1: key 'name': expected a sweep name of letters, digits, '_', '.', '-', got 'my sweep'");
  expect("name: ..\n",
         "F:1: key 'name': expected a sweep name of letters, digits, '_', '.', '-', got '..'");
  expect("name: [a]\n",
         "F:1: key 'name': expected a sweep name of letters, digits, '_', '.', '-', got a list");
  expect("name: s\nname: t\n", "F:2: key 'name' is set twice (first at F:1)");
  expect("name: s\nbase: [1]\n", "F:2: key 'base': expected a mapping of run config keys, got a list");
  expect("name: s\ninclude: {a: 1}\n",
         "F:2: key 'include': expected a list of file paths, got a mapping");
  expect("name: s\ninclude:\n  - [x]\n", "F:3: key 'include': item 1: expected a file path, got a list");
  expect("name: s\ndescription: [x]\n", "F:2: key 'description': expected a string, got a list");
}

// Issue #17 §1: inputs that passed validation and then failed (or crashed) later.
TEST_F(ConfigErrors, AmorGateRanges) {
  expect("name: s\nbase:\n  model.vocab: 260\n  model.amor.kappa: -0.1\n",
         "F:4: key 'model.amor.kappa': must be >= 0.0, got -0.1");
  expect("name: s\nbase:\n  model.vocab: 260\n  model.amor.momentum: 1.5\n",
         "F:4: key 'model.amor.momentum': must be in [0.0, 1.0], got 1.5");
  expect("name: s\nbase:\n  model.vocab: 260\n  model.amor.momentum: -0.5\n",
         "F:4: key 'model.amor.momentum': must be in [0.0, 1.0], got -0.5");
  // The gate takes momentum 1 (the threshold frozen at its initial value, an ablation).
  std::string f = dir_.write("ok.yaml", "name: s\nbase:\n  model: {vocab: 260, kind: amor}\n"
                                        "  model.amor: {kappa: 0.0, momentum: 1.0}\n");
  auto runs = expand_sweep({f}, {});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].config.model.amor.momentum, 1.0);
}

TEST_F(ConfigErrors, VocabSmallerThanTheTokenizer) {
  // The defaults (vocab 256, the byte tokenizer's 259 ids) are refused, naming the key to set.
  expect("name: s\nbase: {train: {steps: 2}}\n",
         "F: key 'model.vocab': model.vocab 256 is smaller than tokenizer byte's 259 ids; set "
         "model.vocab to at least 259");
  expect("name: s\nbase:\n  model.vocab: 258\n",
         "F:3: key 'model.vocab': model.vocab 258 is smaller than tokenizer byte's 259 ids; set "
         "model.vocab to at least 259");
  expect("name: s\nbase:\n  model.vocab: 300\n  data.tokenizer: gpt2\n",
         "F:3: key 'model.vocab': model.vocab 300 is smaller than tokenizer gpt2's 50257 ids; set "
         "model.vocab to at least 50257");
  expect("name: s\nbase:\n  model.vocab: 300\nsweep:\n  grid:\n    data.tokenizer: [byte, llama3]\n",
         "F:3: key 'model.vocab': model.vocab 300 is smaller than tokenizer llama3's 128256 ids; "
         "set model.vocab to at least 128256");
  // MQAR draws its own tokens below model.vocab.
  std::string f = dir_.write("mqar.yaml", "name: s\nbase: {model.vocab: 64, data.source: mqar}\n");
  EXPECT_EQ(expand_sweep({f}, {}).size(), 1u);
}

TEST_F(ConfigErrors, LongScalarsDoNotOverflowTheStack) {
  // std::regex recursed once per character: ~50,000 characters overflowed the stack.
  const std::string long_name(100000, 'a');
  expect("name: " + long_name + "\n",
         "F:1: key 'name': a sweep name is at most 200 bytes (it names the sweep's folder), got "
         "100000 bytes");
  const std::string digits(100000, '1');
  expect("name: s\nbase:\n  model.vocab: 260\n  train.lr: " + digits + "\n",
         "F:4: key 'train.lr': '" + digits + "' is out of the double range");
  expect("name: s\nbase:\n  model.vocab: 260\n  train.steps: " + digits + "\n",
         "F:4: key 'train.steps': '" + digits + "' is out of the 64-bit integer range");
  expect("name: s\nbase:\n  model.vocab: 260\n  train.steps: " + digits + "x\n",
         "F:4: key 'train.steps': expected an integer, got '" + digits + "x'");
  expect("name: s\nbase:\n  model.vocab: 260\n  train.lr: 0." + digits + "e\n",
         "F:4: key 'train.lr': expected a number, got '0." + digits + "e'");
  // The plain matchers take what the regexes took.
  std::string f = dir_.write("ok.yaml", "name: s\nbase:\n  model.vocab: 260\n  train.lr: .5e-3\n"
                                        "  train.steps: 1e3\n  train.eps: 1.\n  train.clip: +2\n"
                                        "  train.warmup_steps: 1.5E+1\n");
  auto runs = expand_sweep({f}, {});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].config.train.lr, 0.5e-3);
  EXPECT_EQ(runs[0].config.train.steps, 1000);
  EXPECT_EQ(runs[0].config.train.eps, 1.0);
  EXPECT_EQ(runs[0].config.train.clip, 2.0);
  EXPECT_EQ(runs[0].config.train.warmup_steps, 15);
  for (const char* bad : {"1e-3", "1.5e0x", "e3", "1e", "+", ".", "1.e3"})
    expect(std::string("name: s\nbase:\n  model.vocab: 260\n  train.steps: ") + bad + "\n",
           std::string("F:4: key 'train.steps': expected an integer, got '") + bad + "'");
  for (const char* bad : {"1e", "e3", ".", "-.e1", "1.5.", "--1"})
    expect(std::string("name: s\nbase:\n  model.vocab: 260\n  train.lr: ") + bad + "\n",
           std::string("F:4: key 'train.lr': expected a number, got '") + bad + "'");
}

TEST_F(ConfigErrors, SweepNameThatAFolderCannotHold) {
  expect("name: " + std::string(300, 'n') + "\n",
         "F:1: key 'name': a sweep name is at most 200 bytes (it names the sweep's folder), got "
         "300 bytes");
  std::string f = dir_.write("ok.yaml", "name: " + std::string(200, 'n') + "\nbase: {model.vocab: 260}\n");
  auto runs = expand_sweep({f}, {});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].sweep.size(), 200u);
  // Run names stop at 200 bytes, so <name>-<hash8> fits a file name too.
  f = dir_.write("runs.yaml", "name: s\nbase: {model.vocab: 260}\nsweep:\n  grid:\n    data.path: ['" +
                                  std::string(1000, 'p') + "']\n");
  runs = expand_sweep({f}, {});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_LE(runs[0].id().size(), 255u);
}

TEST_F(ConfigErrors, SecondYamlDocument) {
  expect("name: s\nbase: {model.vocab: 260}\n---\nname: t\n",
         "F:3: a second YAML document (after `---`): a file holds one; put the other in a file of "
         "its own");
  expect("---\nname: s\nbase: {model.vocab: 260}\n--- # another\nname: t\n",
         "F:4: a second YAML document (after `---`): a file holds one; put the other in a file of "
         "its own");
  expect("name: s\nbase: {model.vocab: 260}\n---\n",
         "F:3: a second YAML document (after `---`): a file holds one; put the other in a file of "
         "its own");
  std::string inc = dir_.write("inc.yaml", "base: {}\n---\nbase: {train.steps: 1}\n");
  expect("name: s\ninclude: [inc.yaml]\n",
         inc + ":2: a second YAML document (after `---`): a file holds one; put the other in a "
               "file of its own");
}

TEST_F(ConfigErrors, IncludedFiles) {
  std::string inc = dir_.write("inc.yaml", "base: {}\nsweep: {seeds: [1]}\n");
  expect("name: s\ninclude: [inc.yaml]\n",
         inc + ":2: key 'sweep' is not allowed in an included file (only include, base, "
               "description)");
  dir_.write("inc.yaml", "base:\n  train:\n    lr: fast\n");
  expect("name: s\ninclude: [inc.yaml]\n",
         inc + ":3: key 'train.lr': expected a number, got 'fast'");
  dir_.write("inc.yaml", "");
  expect("name: s\ninclude: [inc.yaml]\n",
         inc + ": empty file (expected a mapping with include and base)");
}

TEST_F(ConfigErrors, Base) {
  expect("name: s\nbase:\n  train:\n    lr: fast\n",
         "F:4: key 'train.lr': expected a number, got 'fast'");
  expect("name: s\nbase:\n  model:\n    d_modle: 64\n",
         "F:4: unknown key 'model.d_modle' (did you mean 'model.d_model'?)");
  expect("name: s\nbase:\n  model: {kind: amr}\n",
         "F:3: key 'model.kind': expected one of transformer, mamba2, gdn, serial, fused, amor, "
         "oryx, got 'amr'");
  expect("name: s\nbase:\n  model.d_model: 8\n  model: {d_model: 8}\n",
         "F:4: key 'model.d_model' is set twice (first at F:3)");
}

TEST_F(ConfigErrors, Sweep) {
  expect("name: s\nsweep:\n",
         "F:2: key 'sweep': empty sweep (give variants, grid, zip or seeds, or leave out `sweep` for a "
         "single run)");
  expect("name: s\nsweep: {}\n",
         "F:2: key 'sweep': empty sweep (give variants, grid, zip or seeds, or leave out `sweep` for a "
         "single run)");
  expect("name: s\nsweep: [1]\n", "F:2: key 'sweep': expected a mapping with variants, grid, zip, seeds; got a list");
  expect("name: s\nsweep:\n  grd: {}\n",
         "F:3: unknown key 'sweep.grd' (did you mean 'sweep.grid'?); allowed here: sweep.grid, "
         "sweep.zip, sweep.seeds, sweep.variants");
  expect("name: s\nsweep:\n  grid: {}\n",
         "F:3: key 'sweep.grid': empty sweep (give at least one key with a list of values)");
  expect("name: s\nsweep:\n  grid:\n    model.d_model: []\n",
         "F:4: sweep.grid: key 'model.d_model': empty list (a swept key needs at least one value)");
  expect("name: s\nsweep:\n  grid:\n    model.d_model: 64\n",
         "F:4: sweep.grid: key 'model.d_model': expected a list of values to sweep, got '64'");
  expect("name: s\nsweep:\n  grid:\n    model.d_model:\n      - 64\n      - big\n",
         "F:6: sweep.grid: key 'model.d_model': expected an integer, got 'big'");
  expect("name: s\nsweep:\n  grid:\n    model.d_model: [64, 64]\n",
         "F:4: sweep.grid: key 'model.d_model': value 64 appears twice (first at F:4)");
  expect("name: s\nsweep:\n  grid:\n    model.d_modl: [64]\n",
         "F:4: sweep.grid: unknown key 'model.d_modl' (did you mean 'model.d_model'?)");
  expect("name: s\nsweep:\n  grid:\n    model: [64]\n",
         "F:4: sweep.grid: key 'model': expected a mapping of model.* keys, got a list");
  expect("name: s\nsweep:\n  grid:\n    model.d_model: [64]\n    model: {d_model: [32]}\n",
         "F:5: sweep.grid: key 'model.d_model' is set twice (first at F:4)");
  expect("name: s\nsweep:\n  grid:\n    eval.tasks: [a, b]\n",
         "F:4: sweep.grid: key 'eval.tasks': expected a list of strings, got 'a'");
}

TEST_F(ConfigErrors, ZipAndSeeds) {
  expect("name: s\nsweep:\n  zip:\n    model.d_model: [64, 128, 256]\n    train.lr: [0.1, 0.2]\n",
         "F:5: sweep.zip: key 'train.lr' has 2 values but 'model.d_model' (F:4) has 3; zipped "
         "lists need equal lengths");
  expect("name: s\nsweep:\n  zip:\n    model.kind: [amor, amor]\n    train.lr: [0.1, 0.1]\n",
         "F:4: sweep.zip: entry 2 repeats entry 1 (the same value for every zipped key)");
  expect("name: s\nsweep:\n  zip: {}\n",
         "F:3: key 'sweep.zip': empty sweep (give at least one key with a list of values)");
  expect("name: s\nsweep:\n  grid: {train.lr: [0.1]}\n  zip: {train.lr: [0.2]}\n",
         "F:4: sweep.zip: key 'train.lr' is already swept in sweep.grid (F:3)");
  expect("name: s\nsweep:\n  seeds: []\n",
         "F:3: sweep.seeds: key 'train.seed': empty list (a swept key needs at least one value)");
  expect("name: s\nsweep:\n  seeds: [1, x]\n",
         "F:3: sweep.seeds: key 'train.seed': expected an integer, got 'x'");
  expect("name: s\nsweep:\n  seeds: [1, -2]\n",
         "F:3: sweep.seeds: key 'train.seed': must be at least 0, got -2");
  expect("name: s\nsweep:\n  seeds: [3, 3]\n",
         "F:3: sweep.seeds: key 'train.seed': value 3 appears twice (first at F:3)");
  expect("name: s\nsweep:\n  zip: {train.seed: [1, 2]}\n  seeds: [5]\n",
         "F:4: sweep.seeds: key 'train.seed' is already swept in sweep.zip (F:3)");
}

TEST_F(ConfigErrors, RunsThatCannotBe) {
  // A rule between keys fails for one combination: placed at the swept value.
  expect("name: s\nbase: {train.dtype: f64}\nsweep:\n  grid:\n    device: [cpu, cuda]\n",
         "F:2: key 'train.dtype': f64 is not available with device cuda (cuda runs bf16, or f32 "
         "to compare with the cpu)");
  expect("name: s\nsweep:\n  grid:\n    model.kind:\n      - gdn\n      - serial\n",
         "F:6: key 'model.kind': model.kind serial needs model.pattern (e.g. MMMA)");
  expect("name: s\nsweep:\n  grid:\n    train.dtype: [auto, f32]\n",
         "F: sweep 's': runs 'auto' and 'f32' resolve to the same config");
  expect("name: s\nsweep:\n  grid:\n    data.path: [a/b, a_b]\n",
         "F: sweep 's': two different runs are named 'path_a_b' (their values differ only in "
         "characters a file name cannot hold, or past 200 bytes); change the values");
  std::string f = dir_.write("big.yaml",
                             "name: big\nsweep:\n  grid:\n    train.seed: [0, 1, 2, 3]\n"
                             "    train.steps: [1, 2, 3]\n");
  ExpandOptions small;
  small.max_runs = 10;
  EXPECT_EQ(config_error([&] { expand_sweep({f}, {}, small); }),
            f + ":1: sweep 'big' expands to more than 10 runs");
}

TEST_F(ConfigErrors, Overrides) {
  const std::string ok = "name: s\n";
  expect(ok, "override 'train.lr': expected key=value", {"train.lr"});
  expect(ok, "override '=3': expected key=value", {"=3"});
  expect(ok, "override 'train.lr=fast': key 'train.lr': expected a number, got 'fast'",
         {"train.lr=fast"});
  // A key given twice, also through a section's map: refused up front (it once ran and then
  // failed writing the sweep index).
  expect(ok, "override 'train.lr=3e-3': key 'train.lr' is already set by override 'train.lr=1e-3': "
             "give each key once",
         {"train.lr=1e-3", "train.lr=3e-3"});
  expect(ok, "override 'model={d_model: 64}': key 'model.d_model' is already set by override "
             "'model.d_model=32': give each key once",
         {"model.d_model=32", "model={d_model: 64}"});
  expect(ok, "override 'model.d_modle=3': unknown key 'model.d_modle' (did you mean "
             "'model.d_model'?)",
         {"model.d_modle=3"});
  expect(ok, "override 'model.kind=amr': key 'model.kind': expected one of transformer, mamba2, "
             "gdn, serial, fused, amor, oryx, got 'amr'",
         {"model.kind=amr"});
  expect(ok, "override 'model.d_model=': key 'model.d_model': expected an integer, got the "
             "quoted string \"\"",
         {"model.d_model="});
  expect(ok, "override 'model=3': key 'model': expected a mapping of model.* keys, got '3'",
         {"model=3"});
  std::string msg = config_error([&] { expand_sweep({dir_.write("o.yaml", ok)}, {"eval.tasks=[a"}); });
  EXPECT_EQ(msg.substr(0, 42), "override 'eval.tasks=[a': not valid YAML: ");
  // A bad override fails before any file is read.
  EXPECT_EQ(config_error([&] { expand_sweep({dir_.path("missing.yaml")}, {"x=1"}); }),
            "override 'x=1': unknown key 'x'");
}

}  // namespace
}  // namespace amor::config
