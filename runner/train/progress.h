// The progress line a researcher watches: step, loss, tokens/s, the model's summary metrics
// (LanguageModel::summary_metrics: AMOR's fire rate), ETA.
// On a terminal one line is rewritten in place (a live bar); in a log (not a tty) a plain line is
// printed every log interval, so Slurm output files stay readable.
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

class Progress {
 public:
  Progress(std::string run_name, int64_t total_steps, int64_t log_every, std::FILE* out = stdout,
           std::optional<bool> force_tty = std::nullopt);
  // Called every step; prints when the line is due (every step on a tty, each log_every in a log).
  void update(const ProgressRow& row);
  void finish(const std::string& message);
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
