// The evaluation tasks: what to run (TaskSpec), what comes out (TaskResult), and the layout each
// task declares up front in run.h5 (/eval/<task>/: metric attributes, per-example datasets).
//
// Task names (the run.h5 results contract, runner/eval/README.md):
//   lambada                                   acc, ppl             | acc, logprob
//   hellaswag piqa arc_easy arc_challenge     acc, acc_norm        | acc, acc_norm
//   winogrande                                acc                  | acc
//   niah_single_{1,2,3} niah_multikey_{1,2,3} niah_multivalue niah_multiquery passkey
//                                             score                | score, length, depth
//   mqar                                      acc                  | acc
//   longbench_<dataset> (English LongBench)   score, score_0_4k, score_4_8k, score_8k_plus
//                                                                  | score, length
//   ppl_by_position                           ppl, ppl_<a>_<b>...  | position, loss (per bucket)
//   oryx_switch (Oryx models)                 ppl_before, ppl_after | offset, loss (per offset)
// All scores are fractions in [0, 1]; perplexities are exp of a mean NLL.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runner/eval/eval_model.h"
#include "runner/output/run_file.h"

namespace amor::eval {

struct TaskSpec {
  std::string name{};  // one of the names above
  // File-backed tasks (lambada, multiple choice, longbench_*): the jsonl file. ppl_by_position:
  // a .txt (one document) or .jsonl ({"text"} per line) file, or "" for the built-in KJV corpus.
  std::string path{};
  int64_t limit = -1;  // evaluate only the first `limit` examples (-1: all)
  uint64_t seed = 42;

  // niah_* and passkey: the grid (max_seq_length per row, needle depth in percent per column).
  std::vector<int64_t> lengths = {1024};
  std::vector<double> depths = {0, 50, 100};
  int64_t samples_per_cell = 1;
  std::string essay_path{};  // essay haystack text (niah_single_2/3, ...); "" = the KJV corpus

  // mqar (Zoology's multiquery_ar; the test split is seed + 10, as Zoology's).
  int64_t mqar_vocab_size = 8192;
  int64_t mqar_seq_len = 256;
  int64_t mqar_kv_pairs = 16;
  int64_t mqar_examples = 256;
  bool mqar_answers_in_input = false;  // `data.mqar.layout: lm` (data/synthetic/mqar.h)
  bool mqar_random_filler = true;      // Zoology's random_non_queries

  // ppl_by_position: sequences of seq_len tokens (beyond the training length), buckets of
  // bucket_size positions.
  int64_t seq_len = 4096;
  int64_t bucket_size = 512;
  int64_t num_sequences = 8;

  // oryx_switch: sequences of seq_len tokens (text as ppl_by_position's) scored with the mixer
  // `before` (0 linear, 1 attention) at positions < switch_at and `after` from there; offsets
  // -window .. window-1 around switch_at. seq_len and num_sequences as above.
  int64_t switch_at = 128;
  int64_t window = 64;
  uint8_t before = 0, after = 1;
};

struct TaskResult {
  std::map<std::string, double> metrics;
  std::map<std::string, std::vector<double>> per_example;  // one entry per example, same order
};

// True for every name run_task accepts.
bool is_known_task(const std::string& name);
// Every known name, in documentation order (for messages).
std::vector<std::string> known_task_names();
// The English LongBench datasets (longbench_<dataset>).
std::vector<std::string> longbench_datasets();
// The metric attributes and per-example datasets of a task (ppl_by_position's metric names depend
// on seq_len and bucket_size). Unknown names are an error listing the known ones.
EvalTaskSpec task_layout(const TaskSpec& spec);

// Runs one task against the model. Errors (missing file, bad JSON, missing or mistyped field)
// name the file, line and field.
TaskResult run_task(const TaskSpec& spec, EvalModel& model);

}  // namespace amor::eval
