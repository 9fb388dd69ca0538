#include "runner/train/run_record.h"

#include "data/synthetic/token_roles.h"
#include "runner/app/version.h"
#include "runner/config/canonical.h"

namespace amor {

RunFile open_run_record(const std::filesystem::path& path, const config::RunSpec& spec, int world_size,
                        const model::LanguageModel& model, bool recall_task,
                        const std::vector<eval::TaskSpec>& tasks, int64_t start_step, int threads) {
  if (start_step > 0 && std::filesystem::exists(path)) return RunFile::open(path.string(), start_step, spec.hash8);
  RunAttrs attrs;
  attrs.config = config::canonical_yaml(spec.config);
  attrs.config_hash = spec.hash8;
  attrs.sweep = spec.sweep;
  attrs.run_name = spec.name;
  attrs.amor_run_version = version();
  attrs.git_commit = git_commit();
  attrs.world_size = world_size;
  attrs.threads = threads;
  attrs.created = utc_timestamp();
  RunLayout layout;
  EvalTaskSpec valid{"valid", {"loss", "ppl"}, {}};
  for (const auto& sm : model.summary_metrics()) valid.metrics.push_back(sm.name);
  layout.eval_tasks.push_back(valid);
  if (recall_task) layout.eval_tasks.push_back({"mqar", {"acc"}, {"acc"}});
  // The memory report (per rank, bytes) as an /eval group: its attributes exist from creation,
  // as SWMR requires, and are filled after the first step.
  layout.eval_tasks.push_back({"memory", {"param_bytes", "grad_bytes", "optimizer_bytes",
                                          "peak_gathered_bytes", "model_param_bytes", "world_size"}, {}});
  layout.token_sets = {"valid"};
  for (const auto& ts : tasks) {
    layout.eval_tasks.push_back(eval::task_layout(ts));
    layout.token_sets.push_back(ts.name);
  }
  layout.token_columns = model.token_columns();
  layout.role_names = synthetic::token_role_names();
  for (const auto& c : model.metric_columns()) layout.train_columns.push_back({c.name, c.shape});
  return RunFile::create(path.string(), attrs, layout);
}

}  // namespace amor
