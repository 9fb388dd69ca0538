// What each run of an invocation ended with, brought to world rank 0 and reported there: the
// summary table on stdout, each sweep's index.csv, and the exit status they imply.
#pragma once
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/lm/model_kinds.h"
#include "runner/app/shard.h"
#include "runner/config/sweep.h"
#include "runner/train/trainer.h"

namespace amor {

// Per run, what its group reports back to world rank 0.
struct Outcome {
  int status = 0;  // 0 pending, 1 done, 2 skipped (already DONE), 3 stopped, 4 failed
  double final_loss = NAN, valid_loss = NAN, mqar_acc = NAN;
  std::string message;
  std::vector<double> evals;  // the run's eval_columns, in order
  std::vector<double> model;  // the run's model_summary, in order
};

// The scalars the run's model reports in the summary and index.csv besides the loss (its kind's,
// models/lm/model_kinds.h; e.g. the gates' fire_rate): the runner names none itself.
const std::vector<model::SummaryMetric>& model_summary(const config::RunConfig& cfg);

// The evaluation scores a run reports in the summary and index.csv: "<task>_<headline metric>"
// per harness task (mqar's accuracy has its own column, mqar_acc).
std::vector<std::string> eval_columns(const config::RunConfig& cfg);

// Whether an evaluation column means something for the run: every column for runs trained on
// text; for a run trained on MQAR (data.source mqar) only MQAR's (a text task's score of a model
// that saw no text is left blank in the summary and empty in index.csv, though evaluated).
bool eval_column_applies(const config::RunConfig& cfg, const std::string& column);
// Whether the summary's recall column (mqar_acc) applies: MQAR runs, and runs evaluating mqar.
bool recall_applies(const config::RunConfig& cfg);

// A finished train_run's numbers and status (1 done, 3 stopped, 4 failed).
Outcome outcome_of(const config::RunSpec& spec, const RunResult& res);

// Collective over MPI_COMM_WORLD: world rank 0 receives the outcome of each run i from the rank
// that knows it (rank 0 of group i mod groups; groups of ranks_per_run ranks).
void collect_outcomes(const std::vector<config::RunSpec>& runs, std::vector<Outcome>& outcomes, int groups,
                      int ranks_per_run, int world_rank);

// World rank 0: prints the summary table of `runs` (this job's: its shard's, with --shard),
// merges their rows into each sweep's index.csv (update_sweep_index: rows of other jobs sharing
// the folder are kept; rows in the order of `all_runs`, the whole expanded sweep), and returns the
// exit status: kRequeueExitCode (75) if any run was stopped by a signal (checkpointed) or left
// unstarted because of it, whatever the other runs did, so that the batch job is requeued and
// the stopped run resumes (a failed run then runs again); else 1 if a run failed; else 0.
int report_outcomes(const std::vector<config::RunSpec>& runs, const std::vector<Outcome>& outcomes,
                    const std::filesystem::path& output, const std::vector<config::RunSpec>& all_runs,
                    const std::optional<Shard>& shard = std::nullopt);

// The exit status of an invocation whose runs ended with these Outcome::status values (as above).
int exit_status_of(const std::vector<int>& statuses);

}  // namespace amor
