// One run, start to finish, on its group of ranks: build the model and its FSDP wrapper, the data,
// resume from the newest checkpoint if there is one, train with AdamW + warmup/cosine + clipping +
// accumulation, evaluate, write run.h5 and checkpoints, and mark the run DONE.
//
// Every rank of the group runs this; rank 0 of the group alone writes run.h5, the resolved config
// and the DONE marker (checkpoints are written by every rank: one shard file each).
//
// The Trainer's named steps (as torchtitan's trainer.py): setup() builds what the run needs,
// restore() resumes from a checkpoint (or loads eval.checkpoint) and opens run.h5, train_step()
// runs one optimizer step, log_step() records it, evaluate() runs the validation pass and the
// harness, checkpoint() saves, finish() writes the final weights and closes run.h5. run() strings
// them together; train_run() is the whole run in one call. Every step that talks to the run's
// ranks is collective: every rank calls it in the same order. The model is only ever asked
// through LanguageModel's run contract (models/lm/run_contract.h): no step names a model kind.
#pragma once
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "models/lm/language_model.h"
#include "runner/config/sweep.h"
#include "runner/dist/communicator.h"
#include "runner/dist/fsdp.h"
#include "runner/dist/run_group.h"
#include "runner/output/run_file.h"
#include "runner/train/checkpoints.h"
#include "runner/train/data_setup.h"
#include "runner/train/harness_eval.h"
#include "runner/train/progress.h"
#include "runner/train/run_dtypes.h"
#include "runner/train/valid_eval.h"

namespace amor {

enum class TrainStatus { Done, Stopped, Failed };

struct RunResult {
  TrainStatus status = TrainStatus::Failed;
  std::string message;                    // the error, or why it stopped
  std::map<std::string, double> metrics;  // final loss, eval scores, the model's summary metrics
};

struct TrainerOptions {
  std::filesystem::path run_dir;
  bool quiet = false;  // no progress lines (tests)
  bool live = false;   // a live progress bar (one group on a terminal); else plain lines
  int threads = 0;     // BLAS threads per rank (runner/app/threads.h), recorded in run.h5; 0 unknown
  // Builds the run's model and its evaluation replicas; empty: model::build_model (by
  // model.kind). A kind the runner has never seen runs through the same steps (the trainer only
  // uses the run contract): trainer_contract_mpi_test runs one.
  ModelBuilder build_model;
};

RunResult train_run(const config::RunSpec& spec, dist::Communicator& comm, const TrainerOptions& opt);

// What one optimizer step measured (all ranks agree on every value).
struct StepStats {
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;       // this step's tokens over the run's ranks
  model::MetricRow metrics;  // the model's metric columns
};

class Trainer {
 public:
  Trainer(const config::RunSpec& spec, dist::Communicator& comm, const TrainerOptions& opt);
  ~Trainer();

  // The communicators, the model (initialised, eval.weights loaded, on the device, given the run's
  // seed), its FSDP wrapper, the data and the harness tasks.
  void setup();
  // Resumes from the newest checkpoint that loads, or loads eval.checkpoint's weights; then opens
  // run.h5 (rank 0): created, or reopened at the resume step.
  void restore();
  // One optimizer step over grad_accum micro-batches; nullopt when the loss is not finite (the
  // run has failed: result() says why).
  std::optional<StepStats> train_step(int64_t step);
  // run.h5's row, the memory report after the first step, the progress line.
  void log_step(int64_t step, const StepStats& stats);
  // The validation pass and the harness tasks at `step` (after `step` optimizer steps): into
  // run.h5 and the result's metrics; a non-finite score fails the run (throws).
  ValidResult evaluate(int64_t step);
  void checkpoint(int64_t step);
  // After the last step: the final evaluation, model.safetensors, run.h5 finished, the summary.
  void finish();
  // setup, restore, the steps with their evaluations and checkpoints, finish.
  RunResult run();

  const RunResult& result() const { return result_; }
  int64_t start_step() const { return start_step_; }

 private:
  void require_finite(double v, const std::string& what, int64_t step) const;
  void write_profile();

  const config::RunSpec& spec_;
  const config::RunConfig& cfg_;
  dist::Communicator& comm_;
  TrainerOptions opt_;
  bool root_, quiet_;
  RunDtypes dtypes_;
  Device dev_;
  RunResult result_;

  std::unique_ptr<dist::Communicator> nccl_;  // cuda: tensors move over NCCL
  dist::Communicator* tensor_comm_ = nullptr;
  std::unique_ptr<model::LanguageModel> model_;
  std::unique_ptr<dist::Fsdp> fsdp_;
  std::unique_ptr<dist::CommRunGroup> metric_group_;  // the model's metrics, reduced on comm_
  RunData data_;
  HarnessTasks harness_;
  std::unique_ptr<Checkpoints> ckpts_;
  std::optional<RunFile> h5_;
  std::unique_ptr<Progress> progress_;

  int64_t start_step_ = 0, tokens_seen_ = 0;
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  std::chrono::steady_clock::time_point t_last_;
  double step_seconds_ = 0;  // the last step's wall time (train_step to train_step)
  double profiled_seconds_ = 0;
  int64_t profiled_steps_ = 0;
};

}  // namespace amor
