// From a run's config (eval.*, runner/config/README.md) to the harness's tasks: which ones the run
// evaluates, each one's TaskSpec with the run-derived defaults filled in, and the one metric that
// stands for a task in summaries (the sweep's table and index.csv).
#pragma once
#include <string>
#include <vector>

#include "runner/config/run_config.h"
#include "runner/eval/eval_tasks.h"

namespace amor::eval {

// eval.tasks in order, without mqar when data.source is mqar: such a run's own MQAR validation
// set is its mqar task (the trainer writes /eval/mqar from it, as before the harness existed).
std::vector<std::string> harness_tasks(const config::RunConfig& cfg);

// The task's spec: paths and limits from its section, generated tasks' grids, and 0-valued
// options derived from the run (vocabulary, data.seq_len ...). Unknown names are an error.
TaskSpec task_spec(const config::RunConfig& cfg, const std::string& name);

// The metric a summary shows for a task: the first of its metrics (acc, score, ppl ...), except
// oryx_switch's ppl_after.
std::string headline_metric(const std::string& task);

}  // namespace amor::eval
