// run.h5: the one HDF5 file per run (design §6), written by the run's rank 0 and readable by h5py
// (`h5py.File(path, "r", swmr=True)`) while the run is going.
//
//   /                    attrs: config, config_hash, sweep, run_name, amor_run_version, git_commit,
//                               created, finished ("" until finish()) as UTF-8 strings;
//                               world_size, layout_version as int64; the rows_attr of each
//                               token column with rows (today amor_blocks, K) as int64;
//                               threads (int64, BLAS threads per rank the run started with;
//                               absent in files made before it was recorded)
//   /train/{step,tokens}                                   int64   [n]
//   /train/{loss,lr,grad_norm,tokens_per_s}                float64 [n]
//   /train/<column>        the model's metric columns (RunLayout::train_columns): float64 [n] or
//                          [n, width]; every model kind today declares fire_rate, tau [n] and
//                          block_fire_rate, block_tau [n, K] (models/lm/run_contract.h)
//   /eval/<task>/        attrs: one float64 per metric (NaN until measured), step (int64, -1)
//                        datasets: per-example scores, float64 [examples] (latest evaluation)
//   /eval/<task>/history/{step, <metric>...}               every evaluation, one row each
//   /tokens/<set>/       attrs: step (int64, -1 until written)
//                        token_ids int32, entropy float32, loss float32: flat [total]; the
//                        model's token columns (RunLayout::token_columns) uint8 [total] or
//                        [rows, total]: every model kind today declares mode [total] and gate
//                        [K, total] (models/lm/run_contract.h); offsets int64 [sequences + 1],
//                        offsets[0] = 0;
//                        role uint8 [total]: each token's role in its synthetic task
//                        (data/synthetic/token_roles.h: MQAR key/value/query/filler, NIAH and
//                        passkey other/needle/distractor/haystack/question/answer; 0 = none for
//                        tasks without roles), with attribute `names`: an array of strings,
//                        names[code] the role's name. Absent in files made before roles were
//                        recorded (a run resumed in such a file records none)
//                        (chunked, shuffle + gzip)
//
// HDF5 1.10's SWMR cannot create objects or attributes once a writer is in SWMR mode, so every
// group, dataset and attribute is created up front from RunLayout and later only resized and
// overwritten. A file is built under a temporary name and renamed into place once complete, so
// `path` never holds a half-made layout. Every dataset grows along one axis; all are chunked.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/lm/run_contract.h"

namespace amor {

using model::TokenColumn;

struct RunAttrs {
  std::string config;       // the resolved run config (YAML text)
  std::string config_hash;  // full hash of the resolved config
  std::string sweep;
  std::string run_name;
  std::string amor_run_version;
  std::string git_commit;
  int64_t world_size = 1;
  int64_t threads = 0;  // BLAS threads per rank (runner/app/threads.h)
  std::string created;  // utc_timestamp()
};

struct EvalTaskSpec {
  std::string name;                      // group /eval/<name>
  std::vector<std::string> metrics;      // attribute names, e.g. {"acc", "acc_norm"}
  std::vector<std::string> per_example;  // dataset names, e.g. {"acc", "acc_norm"}
};

// A /train column beyond the runner's own: float64, shape {} ([n]) or {width} ([n, width]).
struct TrainColumn {
  std::string name;
  std::vector<int64_t> shape;
};

// Everything that must exist before SWMR starts.
struct RunLayout {
  std::vector<EvalTaskSpec> eval_tasks;
  std::vector<std::string> token_sets;  // groups /tokens/<name>
  // The model's per-token columns of every token set, created after the runner's own.
  std::vector<TokenColumn> token_columns;
  std::vector<TrainColumn> train_columns;  // created after the runner's own, in this order
  // The names of the token role codes (names[code]): every token set gets a `role` dataset with
  // them as its `names` attribute; empty: no role dataset.
  std::vector<std::string> role_names;
};

// One logged training step: the runner's values, then the model's columns by name (a column not
// given is written as NaN; one given has its shape's element count).
struct TrainRow {
  int64_t step = 0;    // optimizer steps completed
  int64_t tokens = 0;  // training tokens consumed so far
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  std::map<std::string, std::vector<double>> columns;
};

// One or more sequences back to back (total = sum of lengths tokens). Per token: its id, the
// normalised entropy of the model's next-token distribution, the next-token loss (NaN where there
// is no target), and the model's token columns by name: a [total] column, or [rows, total]
// row-major (column[k * total + t]); a [total] column left out or empty is written as 0. role:
// each token's role code ([total]; empty: written as 0, none).
struct TokenSequences {
  std::vector<int64_t> lengths;
  std::vector<int32_t> token_ids;
  std::vector<float> entropy;
  std::vector<float> loss;
  std::vector<uint8_t> role;
  std::map<std::string, std::vector<uint8_t>> columns;
};

// Sets seqs.columns from per-token rows [row][t] of `columns` (their rows in order, as
// model::LanguageModel::token_rows gives them).
void set_token_rows(TokenSequences& seqs, const std::vector<TokenColumn>& columns,
                    const std::vector<std::vector<uint8_t>>& rows);

class RunFile {
 public:
  static constexpr int64_t kLayoutVersion = 1;

  // Builds a new run file at `path` (replacing any file there) and leaves it open in SWMR mode.
  static RunFile create(const std::string& path, const RunAttrs& attrs, const RunLayout& layout);
  // Reopens a run's file to continue after resuming from a checkpoint at `resume_step`: training
  // rows and evaluations logged after that step are dropped (so the resumed run repeats none),
  // token sets recorded after it are emptied, `finished` is reset. Works on a file whose writer
  // was killed (its SWMR status flags are cleared). A non-empty expected_config_hash must equal
  // the file's config_hash.
  static RunFile open(const std::string& path, int64_t resume_step,
                      const std::string& expected_config_hash = "");
  // Throws amor::Error naming `path` unless it is a readable HDF5 file (not empty, not cut short
  // before its superblock, permitted). Only reads: a resume checks its file with this first, so a
  // file it cannot read is left as it is rather than replaced.
  static void check_readable(const std::string& path);

  RunFile(RunFile&&) noexcept;
  RunFile& operator=(RunFile&&) noexcept;
  ~RunFile();  // closes (without throwing); call close() to see errors

  // Steps must increase.
  void append_train(const TrainRow& row);
  // Sets every declared metric attribute of the task (NaN for those not given), its step, a row
  // of its history, and replaces its per-example datasets (those not given become empty).
  void write_eval(const std::string& task, int64_t step, const std::map<std::string, double>& metrics,
                  const std::map<std::string, std::vector<double>>& per_example = {});
  // Appends sequences to a token set. A set holds one step's recording: writing with a step other
  // than the set's current one empties it first.
  void write_tokens(const std::string& set, int64_t step, const TokenSequences& seqs);
  void flush();                                   // readers see everything written so far
  void finish(const std::string& finished_time);  // sets `finished` and flushes
  void close();

  const std::string& path() const;
  // Rows of a token column's dataset (1 for a [total] column; -1: no such column).
  int64_t token_column_rows(const std::string& column) const;
  // The root attribute `threads` (BLAS threads per rank at creation); -1 where the file has none.
  int64_t threads() const;
  int64_t train_rows() const;
  std::vector<int64_t> train_steps() const;

 private:
  struct Impl;
  explicit RunFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The current time as ISO 8601 UTC ("2025-06-01T12:34:56Z"), for `created` and `finished`.
std::string utc_timestamp();

}  // namespace amor
