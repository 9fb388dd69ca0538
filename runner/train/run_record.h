// A run's run.h5 (design §6; rank 0 only): created with the layout the run will fill, or reopened
// at the step a resume starts from (its later rows dropped). The layout comes from the run and
// what the model declares (models/lm/run_contract.h): /train's metric columns, /eval/valid's
// summary metrics, the gate rows of /tokens; the harness tasks add their /eval and /tokens groups.
#pragma once
#include <filesystem>
#include <vector>

#include "models/lm/language_model.h"
#include "runner/config/sweep.h"
#include "runner/eval/eval_tasks.h"
#include "runner/output/run_file.h"

namespace amor {

RunFile open_run_record(const std::filesystem::path& path, const config::RunSpec& spec, int world_size,
                        const model::LanguageModel& model, bool recall_task,
                        const std::vector<eval::TaskSpec>& tasks, int64_t start_step, int threads = 0);

}  // namespace amor
