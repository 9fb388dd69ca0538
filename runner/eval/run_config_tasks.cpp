// eval.* -> TaskSpec (see run_config_tasks.h).
#include "runner/eval/run_config_tasks.h"

#include <algorithm>

#include "kernels/core/error.h"

namespace amor::eval {

std::vector<std::string> harness_tasks(const config::RunConfig& cfg) {
  std::vector<std::string> out;
  for (const auto& t : cfg.eval.tasks)
    if (!(t == "mqar" && cfg.data.source == "mqar") && std::find(out.begin(), out.end(), t) == out.end())
      out.push_back(t);
  return out;
}

TaskSpec task_spec(const config::RunConfig& cfg, const std::string& name) {
  AMOR_CHECK(is_known_task(name), "eval.tasks: unknown task '{}'", name);
  const config::EvalConfig& e = cfg.eval;
  TaskSpec s;
  s.name = name;
  s.seed = static_cast<uint64_t>(e.seed);
  const int64_t default_limit = e.max_examples > 0 ? e.max_examples : -1;
  auto limit = [&](int64_t l) { return l > 0 ? l : default_limit; };
  const std::pair<const char*, const config::EvalFileTask*> files[] = {
      {"lambada", &e.lambada}, {"hellaswag", &e.hellaswag}, {"piqa", &e.piqa},
      {"arc_easy", &e.arc_easy}, {"arc_challenge", &e.arc_challenge}, {"winogrande", &e.winogrande}};
  for (const auto& [task, file] : files)
    if (name == task) {
      s.path = file->path;
      s.limit = limit(file->limit);
    }
  if (name.rfind("longbench_", 0) == 0) {
    s.path = e.longbench_dir + "/" + name.substr(10) + ".jsonl";
    s.limit = limit(e.longbench_limit);
  }
  if (name.rfind("niah_", 0) == 0 || name == "passkey") {
    s.lengths = e.niah.lengths;
    s.depths = e.niah.depths;
    s.samples_per_cell = e.niah.samples_per_cell;
    s.essay_path = e.niah.essay_path;
    s.limit = default_limit;
  }
  if (name == "mqar") {
    s.mqar_vocab_size = e.mqar.vocab_size > 0 ? e.mqar.vocab_size : cfg.model.vocab;
    s.mqar_seq_len = e.mqar.seq_len > 0 ? e.mqar.seq_len : cfg.data.seq_len;
    s.mqar_kv_pairs = e.mqar.kv_pairs > 0 ? e.mqar.kv_pairs : cfg.data.mqar.num_kv_pairs;
    s.mqar_examples = e.mqar.examples;
    s.mqar_answers_in_input = cfg.data.mqar.layout == "lm";  // the training data's layout
    s.mqar_random_filler = cfg.data.mqar.random_filler;
    s.limit = default_limit;
  }
  if (name == "ppl_by_position") {
    s.path = e.ppl_by_position.path;
    s.seq_len = e.ppl_by_position.seq_len > 0 ? e.ppl_by_position.seq_len : 4 * cfg.data.seq_len;
    s.bucket_size = e.ppl_by_position.bucket_size > 0 ? e.ppl_by_position.bucket_size : cfg.data.seq_len;
    s.num_sequences = e.ppl_by_position.num_sequences;
  }
  if (name == "oryx_switch") {
    const auto& o = e.oryx_switch;
    s.path = o.path;
    s.seq_len = o.seq_len > 0 ? o.seq_len : 2 * cfg.data.seq_len;
    s.switch_at = o.switch_at > 0 ? o.switch_at : s.seq_len / 2;
    s.window = o.window > 0 ? o.window : std::min(s.switch_at, s.seq_len - s.switch_at);
    s.before = o.before == "attention" ? 1 : 0;
    s.after = o.after == "attention" ? 1 : 0;
    s.num_sequences = o.num_sequences;
  }
  return s;
}

std::string headline_metric(const std::string& task) {
  if (task == "oryx_switch") return "ppl_after";
  TaskSpec s;
  s.name = task;
  return task_layout(s).metrics.at(0);
}

}  // namespace amor::eval
