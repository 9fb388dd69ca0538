// results/<sweep>/index.csv: one row per run of a sweep (design §6), for pandas and spreadsheets.
//
// Columns: run, hash, status (pending | running | done | failed), then every sweep key that any
// row has (first-seen order), then every final metric that any row has (first-seen order), then
// error (the failure message of a failed run). Cells a run lacks are empty; numbers are written
// in their shortest round-trip form ("nan", "inf" for non-finite ones). Quoting follows RFC 4180.
// The file is replaced atomically, so a reader never sees half an index.
//
// Several amor-run jobs may share one sweep folder (a job array, `--shard i/n`): each merges its
// rows into the file (update_sweep_index) under an exclusive lock on <dir>/.index.lock (flock),
// so no job's rows are lost to another's rewrite.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace amor {

enum class RunStatus { Pending, Running, Done, Failed };
const char* to_string(RunStatus s);

struct SweepIndexRow {
  std::string run;   // run name
  std::string hash;  // config hash (8 hex digits as in the run's folder name, or the full hash)
  RunStatus status = RunStatus::Pending;
  std::vector<std::pair<std::string, std::string>> keys;  // sweep key (dotted) -> value as text
  std::vector<std::pair<std::string, double>> metrics;    // e.g. final_loss, mqar/accuracy
  std::string error;                                      // why a failed run failed
};

// The CSV text. Throws amor::Error if a column name is used twice (by a row, or by a key and a
// metric, or by a fixed column).
std::string sweep_index_csv(const std::vector<SweepIndexRow>& rows);
// Writes <dir>/index.csv atomically, creating dir if needed; errors name the path.
void write_sweep_index(const std::string& dir, const std::vector<SweepIndexRow>& rows);

// The row's key in a merge: "<run>-<hash>", as the run's folder name.
std::string sweep_index_id(const SweepIndexRow& row);

// Reads index.csv text as sweep_index_csv writes it (RFC 4180; empty cells are absent values).
// Which columns between status and error are metrics: is_metric(name) for the first one, and
// every column after it (sweep_index_csv writes keys before metrics); the others are keys. A
// metric cell is read as a number ("nan", "inf" too). Throws amor::Error (naming `what`) on text
// that is not such a table.
std::vector<SweepIndexRow> parse_sweep_index_csv(const std::string& text, const std::string& what,
                                                 const std::function<bool(const std::string&)>& is_metric);

struct SweepIndexMerge {
  // Run ids (sweep_index_id) in sweep order: the merged rows of these runs come first, in this
  // order; rows of other runs follow in the order the file had them.
  std::vector<std::string> order;
  // Ids whose given row yields to the row the file already has (a DONE run skipped by this job,
  // or one it never started: the file's row knows more). Used only when the file has no row.
  std::set<std::string> weak;
  // Classifies the file's columns (parse_sweep_index_csv); empty: "final_loss" only.
  std::function<bool(const std::string&)> is_metric;
};

// Merges `rows` into <dir>/index.csv: under an exclusive flock on <dir>/.index.lock, reads the
// file (if any), replaces the rows of the same runs (by sweep_index_id, except `weak` ones), keeps
// the others, and writes the result atomically (temporary file + rename). Safe against other
// processes doing the same, on one machine or on a shared file system with flock (NFSv4, Lustre,
// GPFS). Creates dir if needed; errors name the path. An index.csv that cannot be parsed is
// replaced by the given rows (with a warning on stderr).
void update_sweep_index(const std::string& dir, const std::vector<SweepIndexRow>& rows,
                        const SweepIndexMerge& merge = {});

}  // namespace amor
