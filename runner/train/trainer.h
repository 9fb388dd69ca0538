// One run, start to finish, on its group of ranks: build the model and its FSDP wrapper, the data,
// resume from the newest checkpoint if there is one, train with AdamW + warmup/cosine + clipping +
// accumulation, evaluate, write run.h5 and checkpoints, and mark the run DONE.
//
// Every rank of the group runs this; rank 0 of the group alone writes run.h5, the resolved config
// and the DONE marker (checkpoints are written by every rank: one shard file each).
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "runner/config/sweep.h"
#include "runner/dist/communicator.h"

namespace amor {

enum class TrainStatus { Done, Stopped, Failed };

struct RunResult {
  TrainStatus status = TrainStatus::Failed;
  std::string message;                    // the error, or why it stopped
  std::map<std::string, double> metrics;  // final loss, eval scores, fire rate
};

struct TrainerOptions {
  std::filesystem::path run_dir;
  bool quiet = false;  // no progress lines (tests)
  bool live = false;   // a live progress bar (one group on a terminal); else plain lines
};

RunResult train_run(const config::RunSpec& spec, dist::Communicator& comm, const TrainerOptions& opt);

}  // namespace amor
