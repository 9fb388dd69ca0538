// Task names, their run.h5 layout, and dispatch (see eval_tasks.h).
#include "runner/eval/eval_tasks.h"

#include <algorithm>

#include "data/synthetic/niah.h"
#include "kernels/core/error.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {
namespace {

enum class Family { Lambada, MultipleChoice, Winogrande, Needle, LongBench, Mqar, PplByPosition, OryxSwitch };

bool is_longbench(const std::string& name) {
  const std::string prefix = "longbench_";
  if (name.rfind(prefix, 0) != 0) return false;
  const auto ds = longbench_datasets();
  return std::find(ds.begin(), ds.end(), name.substr(prefix.size())) != ds.end();
}

}  // namespace

std::vector<std::string> known_task_names() {
  std::vector<std::string> names = {"lambada", "hellaswag", "piqa", "arc_easy", "arc_challenge",
                                    "winogrande"};
  for (const auto& n : synthetic::niah_task_names()) names.push_back(n);
  names.push_back("passkey");
  names.push_back("mqar");
  names.push_back("ppl_by_position");
  names.push_back("oryx_switch");
  for (const auto& d : longbench_datasets()) names.push_back("longbench_" + d);
  return names;
}

namespace {

Family family(const std::string& name) {
  if (name == "lambada") return Family::Lambada;
  if (name == "hellaswag" || name == "piqa" || name == "arc_easy" || name == "arc_challenge")
    return Family::MultipleChoice;
  if (name == "winogrande") return Family::Winogrande;
  if (name == "passkey") return Family::Needle;
  const auto niah = synthetic::niah_task_names();
  if (std::find(niah.begin(), niah.end(), name) != niah.end()) return Family::Needle;
  if (name == "mqar") return Family::Mqar;
  if (name == "ppl_by_position") return Family::PplByPosition;
  if (name == "oryx_switch") return Family::OryxSwitch;
  if (is_longbench(name)) return Family::LongBench;
  std::string list;
  for (const auto& n : known_task_names()) list += (list.empty() ? "" : ", ") + n;
  throw Error(fmt::format("eval: unknown task '{}' (known: {})", name, list));
}

}  // namespace

bool is_known_task(const std::string& name) {
  const auto names = known_task_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

EvalTaskSpec task_layout(const TaskSpec& spec) {
  EvalTaskSpec t;
  t.name = spec.name;
  switch (family(spec.name)) {
    case Family::Lambada: t.metrics = {"acc", "ppl"}; t.per_example = {"acc", "logprob"}; break;
    case Family::MultipleChoice: t.metrics = t.per_example = {"acc", "acc_norm"}; break;
    case Family::Winogrande: t.metrics = t.per_example = {"acc"}; break;
    case Family::Mqar: t.metrics = t.per_example = {"acc"}; break;
    case Family::Needle: t.metrics = {"score"}; t.per_example = {"score", "length", "depth"}; break;
    case Family::LongBench:
      t.metrics = {"score", "score_0_4k", "score_4_8k", "score_8k_plus"};
      t.per_example = {"score", "length"};
      break;
    case Family::PplByPosition:
      t.metrics = {"ppl"};
      for (const auto& [a, b] : position_buckets(spec.seq_len, spec.bucket_size))
        t.metrics.push_back(fmt::format("ppl_{}_{}", a, b));
      t.per_example = {"position", "loss"};
      break;
    case Family::OryxSwitch:
      t.metrics = {"ppl_before", "ppl_after"};
      t.per_example = {"offset", "loss"};
      break;
  }
  return t;
}

TaskResult run_task(const TaskSpec& spec, EvalModel& model) {
  switch (family(spec.name)) {
    case Family::Lambada: return run_lambada(spec, model);
    case Family::MultipleChoice:
    case Family::Winogrande: return run_multiple_choice(spec, model);
    case Family::Needle: return run_needle_task(spec, model);
    case Family::LongBench: return run_longbench(spec, model);
    case Family::Mqar: return run_mqar(spec, model);
    case Family::PplByPosition: return run_ppl_by_position(spec, model);
    case Family::OryxSwitch: return run_oryx_switch(spec, model);
  }
  throw Error(fmt::format("eval: unhandled task '{}'", spec.name));
}

}  // namespace amor::eval
