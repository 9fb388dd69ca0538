// The progress line a researcher watches: step, loss, tokens/s, the model's summary metrics
// (LanguageModel::summary_metrics: AMOR's fire rate), ETA.
// On a terminal one line is rewritten in place (a live bar); in a log (not a tty) a plain line is
// printed every log interval, so Slurm output files stay readable. live_progress() decides which.
//   step  120/500 [#####.......]  loss 3.2141  lr 9.5e-04  12.3k tok/s  fire 0.218  ETA 1m20s
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace amor {

struct ProgressRow {
  int64_t step = 0;  // steps done
  double loss = 0;
  double lr = 0;
  double tokens_per_s = 0;
  std::vector<std::pair<std::string, double>> metrics;  // (label, value), in order
};

// What decides between the live bar and plain lines (live_progress).
struct ProgressContext {
  int groups = 1;                   // run groups printing at once (their bars would interleave)
  std::optional<std::string> mode;  // AMOR_PROGRESS: "plain" or "live" force one; else unset
  bool slurm_job = false;           // SLURM_JOB_ID is set: a batch job's output is a log file
  bool stdout_terminal = false;     // stdout_reaches_terminal()
};
// The live bar only with one group, stdout reaching a terminal and no Slurm job; plain lines
// otherwise. AMOR_PROGRESS=plain forces lines, AMOR_PROGRESS=live the bar (e.g. under salloc).
bool live_progress(const ProgressContext& c);
// Whether this process's stdout reaches a terminal. Open MPI's mpirun gives its ranks' stdout a
// pseudo-terminal of its own whatever mpirun writes to, so under it (OMPI_COMM_WORLD_SIZE set) the
// launcher's stdout is asked instead (/proc/<parent>/fd/1, a tty device or not).
bool stdout_reaches_terminal();

class Progress {
 public:
  Progress(std::string run_name, int64_t total_steps, int64_t log_every, std::FILE* out = stdout,
           std::optional<bool> force_tty = std::nullopt);
  // Called every step; prints when the line is due (every step on a tty, each log_every in a log).
  void update(const ProgressRow& row);
  void finish(const std::string& message);
  // A line of its own between progress lines ("<run> <message>"), e.g. each evaluation task as it
  // ends: evaluations at 32K tokens and 1.5B parameters take minutes without a progress line.
  void note(const std::string& message);
  static std::string format_duration(double seconds);  // "1h02m", "3m20s", "42s"
  std::string format(const ProgressRow& row, double eta_seconds) const;

 private:
  std::string run_;
  int64_t total_, every_;
  std::FILE* out_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  int64_t first_step_ = -1;
};

}  // namespace amor
