// The eval.* keys: number lists, per-task sections, dotted overrides, and the eval rules
// (check_eval_config, as amor-run resolves runs) with their exact messages.
#include <gtest/gtest.h>

#include "runner/config/canonical.h"
#include "runner/config/config_test_util.h"
#include "runner/config/eval_checks.h"
#include "runner/config/sweep.h"
#include "runner/eval/run_config_tasks.h"

namespace amor::config {
namespace {

using testing::config_error;
using testing::TempDir;

ExpandOptions with_eval_checks() {
  ExpandOptions eo;
  eo.resolve = [](RunConfig& c, const KeyLocations& set_at) { check_eval_config(c, set_at, {"cfg", 0}); };
  eo.check_tokenizer_vocab = false;  // the default model.vocab (config_errors_test checks it)
  return eo;
}

class ConfigEval : public ::testing::Test {
 protected:
  std::vector<RunSpec> expand(const std::string& text, const std::vector<std::string>& overrides = {}) {
    file_ = dir_.write("s.yaml", text);
    return expand_sweep({file_}, overrides, with_eval_checks());
  }
  std::string error(const std::string& text, const std::vector<std::string>& overrides = {}) {
    return config_error([&] { expand(text, overrides); });
  }
  TempDir dir_;
  std::string file_;
};

TEST_F(ConfigEval, SectionsListsAndOverrides) {
  auto runs = expand(
      "name: s\nbase:\n  data.seq_len: 64\n  eval:\n    tasks: [mqar, niah_single_1, ppl_by_position, lambada]\n"
      "    lambada: {path: data/lambada_openai.jsonl, limit: 500}\n"
      "    niah: {lengths: [256, 512], depths: [0, 50, 100]}\n",
      {"eval.lambada.path=other.jsonl", "eval.niah.depths=[10, 90.5]"});
  ASSERT_EQ(runs.size(), 1u);
  const EvalConfig& e = runs[0].config.eval;
  EXPECT_EQ(e.lambada.path, "other.jsonl");  // the override wins
  EXPECT_EQ(e.lambada.limit, 500);
  EXPECT_EQ(e.niah.lengths, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(e.niah.depths, (std::vector<double>{10, 90.5}));
  // Lists round-trip through config.json and config.yaml.
  const std::string text = canonical_json(runs[0].config);
  EXPECT_NE(text.find("\"lengths\": [\n"), std::string::npos) << text;
  EXPECT_EQ(canonical_json(load_run_config_json(text, "config.json")), text);
  EXPECT_EQ(canonical_json(load_run_config_yaml(canonical_yaml(runs[0].config), "config.yaml")), text);

  // Task specs: the section's values and the run-derived defaults.
  const auto niah = eval::task_spec(runs[0].config, "niah_single_1");
  EXPECT_EQ(niah.lengths, (std::vector<int64_t>{256, 512}));
  const auto ppl = eval::task_spec(runs[0].config, "ppl_by_position");
  EXPECT_EQ(ppl.seq_len, 256);      // 4 * data.seq_len
  EXPECT_EQ(ppl.bucket_size, 64);   // data.seq_len
  const auto lambada = eval::task_spec(runs[0].config, "lambada");
  EXPECT_EQ(lambada.path, "other.jsonl");
  EXPECT_EQ(lambada.limit, 500);
  EXPECT_EQ(eval::harness_tasks(runs[0].config).size(), 4u);
  runs[0].config.data.source = "mqar";  // the run's own MQAR validation set is its mqar task
  EXPECT_EQ(eval::harness_tasks(runs[0].config).size(), 3u);
  EXPECT_EQ(eval::headline_metric("lambada"), "acc");
  EXPECT_EQ(eval::headline_metric("oryx_switch"), "ppl_after");
}

TEST_F(ConfigEval, BadValuesNameFileLineAndKey) {
  std::string e = error("name: s\nbase:\n  eval.niah.lengths: [256, x]\n");
  EXPECT_EQ(e, file_ + ":3: key 'eval.niah.lengths': item 2: expected an integer, got 'x'");
  EXPECT_EQ(error("name: s\nbase:\n  eval.niah.lengths: [256, 0]\n"),
            file_ + ":3: key 'eval.niah.lengths': item 2: must be at least 1, got 0");
  EXPECT_EQ(error("name: s\nbase:\n  eval.niah.depths: [0, 101]\n"),
            file_ + ":3: key 'eval.niah.depths': item 2: must be in [0.0, 100.0], got 101.0");
  EXPECT_EQ(error("name: s\nbase:\n  eval.niah.depths: 50\n"),
            file_ + ":3: key 'eval.niah.depths': expected a list of numbers, got '50'");
  EXPECT_EQ(error("name: s\nbase:\n  eval.prefill_chunk: -4\n"),
            file_ + ":3: key 'eval.prefill_chunk': must be at least 0, got -4");
}

TEST_F(ConfigEval, EvalRules) {
  const std::string unknown = error("name: s\nbase:\n  eval:\n    tasks: [mqar, lambda]\n");
  EXPECT_EQ(unknown.rfind(file_ + ":4: key 'eval.tasks': unknown task 'lambda' (known: lambada, "
                                  "hellaswag, ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("oryx_switch"), std::string::npos);
  EXPECT_EQ(error("name: s\nbase:\n  eval.tasks: [lambada]\n"),
            file_ + ":3: key 'eval.tasks': the task lambada needs eval.lambada.path (its jsonl file)");
  EXPECT_EQ(error("name: s\nbase:\n  model.kind: gdn\n  eval.tasks: [oryx_switch]\n"),
            file_ + ":4: key 'eval.tasks': the task oryx_switch needs model.kind oryx (this run's is gdn)");
  EXPECT_EQ(error("name: s\nbase:\n  eval.checkpoint: results/x\n"),
            file_ + ":3: key 'eval.checkpoint': eval.checkpoint evaluates a checkpoint without "
                    "training and needs train.steps: 0 (got 1000); eval.weights starts training from weights");
  EXPECT_EQ(error("name: s\nbase:\n  train.steps: 0\n  eval: {checkpoint: a, weights: b.safetensors}\n"),
            file_ + ":4: key 'eval.checkpoint': eval.weights and eval.checkpoint both name weights to "
                    "evaluate; set one");
  // eval.router drives entropy gates: only kinds that have them.
  EXPECT_EQ(error("name: s\nbase:\n  model.kind: gdn\n  eval.router: r.safetensors\n"),
            file_ + ":4: key 'eval.router': eval.router replaces the entropy gates of model.kind "
                    "amor; this run's model.kind gdn has none");
  // On the command line too.
  EXPECT_EQ(error("name: s\nbase: {}\n", {"eval.tasks=[nope]"}).rfind(
                "override 'eval.tasks=[nope]': key 'eval.tasks': unknown task 'nope'", 0), 0u);
  EXPECT_EQ(expand("name: s\nbase: {train.steps: 0, eval.checkpoint: results/x, model.kind: oryx, "
                   "eval.tasks: [oryx_switch]}\n").size(), 1u);
}

// eval.dtype: master (the default, left out of the canonical config and its hash) or compute.
TEST_F(ConfigEval, DtypeIsMasterOrCompute) {
  auto plain = expand("name: s\nbase: {}\n");
  auto compute = expand("name: s\nbase: {eval.dtype: compute}\n");
  auto master = expand("name: s\nbase: {eval.dtype: master}\n");
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].config.eval.dtype, "master");
  EXPECT_EQ(compute[0].config.eval.dtype, "compute");
  EXPECT_EQ(master[0].hash8, plain[0].hash8);
  EXPECT_NE(compute[0].hash8, plain[0].hash8);
  EXPECT_EQ(error("name: s\nbase:\n  eval.dtype: bf16\n").rfind(file_ + ":3: key 'eval.dtype'", 0), 0u);
}

}  // namespace
}  // namespace amor::config
