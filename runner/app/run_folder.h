// A run's folder before its group trains it (world rank 0 of the group only): refuse a folder that
// holds another config or a checkpointed run without a readable run.h5, create it, lock it while
// the run goes, write the resolved config.
#pragma once
#include <filesystem>
#include <optional>

#include "runner/app/run_lock.h"
#include "runner/config/sweep.h"

namespace amor {

// Throws amor::Error saying what is wrong and what to do. `lock` receives the folder's lock
// (taken after the folder exists, before run.h5 is checked and the config written).
void prepare_run_folder(const config::RunSpec& spec, const std::filesystem::path& output,
                        std::optional<RunLock>& lock);

}  // namespace amor
