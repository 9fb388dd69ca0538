// The eval.* rules (see eval_checks.h).
#include "runner/config/eval_checks.h"

#include <fmt/format.h>

#include "models/lm/model_kinds.h"
#include "runner/eval/eval_tasks.h"

namespace amor::config {

void check_eval_config(const RunConfig& c, const KeyLocations& set_at, const Location& fallback) {
  auto at = [&](const std::string& key) {
    auto it = set_at.find(key);
    return it != set_at.end() ? it->second : fallback;
  };
  auto blame = [&](const std::string& a, const std::string& b) {
    return set_at.count(b) ? b : set_at.count(a) ? a : b;
  };
  // eval.*: task names (the known list in the message), what the named tasks need, and the two
  // ways to evaluate existing weights.
  for (const std::string& task : c.eval.tasks) {
    if (!eval::is_known_task(task)) {
      std::string known;
      for (const std::string& n : eval::known_task_names()) known += (known.empty() ? "" : ", ") + n;
      fail(at("eval.tasks"), fmt::format("key 'eval.tasks': unknown task '{}' (known: {})", task, known));
    }
    // The task switches the model's per-token mixer modes: the kinds that take modes (Oryx).
    if (task == "oryx_switch" && !model::kind_traits(c.model.kind).takes_modes) {
      std::string k = blame("model.kind", "eval.tasks");
      fail(at(k), fmt::format("key '{}': the task {} needs model.kind {} (this run's is {})", k, task,
                              model::kinds_with(&model::KindTraits::takes_modes), c.model.kind));
    }
    const std::pair<const char*, const EvalFileTask*> files[] = {
        {"lambada", &c.eval.lambada},     {"hellaswag", &c.eval.hellaswag},
        {"piqa", &c.eval.piqa},           {"arc_easy", &c.eval.arc_easy},
        {"arc_challenge", &c.eval.arc_challenge}, {"winogrande", &c.eval.winogrande}};
    for (const auto& [name, file] : files)
      if (task == name && file->path.empty())
        fail(at("eval.tasks"), fmt::format("key 'eval.tasks': the task {} needs eval.{}.path (its "
                                           "jsonl file)", task, task));
    if (task.rfind("longbench_", 0) == 0 && c.eval.longbench_dir.empty())
      fail(at("eval.tasks"), fmt::format("key 'eval.tasks': the task {} needs eval.longbench.dir "
                                         "(the folder of LongBench's <dataset>.jsonl files)", task));
  }
  if (!c.eval.weights.empty() && !c.eval.checkpoint.empty()) {
    std::string k = blame("eval.weights", "eval.checkpoint");
    fail(at(k), "key '" + k + "': eval.weights and eval.checkpoint both name weights to "
                "evaluate; set one");
  }
  if (!c.eval.router.empty() && !model::kind_traits(c.model.kind).has_entropy_gates) {
    std::string k = blame("model.kind", "eval.router");
    fail(at(k), fmt::format("key '{}': eval.router replaces the entropy gates of model.kind {}; "
                            "this run's model.kind {} has none", k,
                            model::kinds_with(&model::KindTraits::has_entropy_gates), c.model.kind));
  }
  if (!c.eval.checkpoint.empty() && c.train.steps != 0) {
    std::string k = blame("train.steps", "eval.checkpoint");
    fail(at(k), fmt::format("key '{}': eval.checkpoint evaluates a checkpoint without training and "
                            "needs train.steps: 0 (got {}); eval.weights starts training from "
                            "weights", k, c.train.steps));
  }

}

}  // namespace amor::config
