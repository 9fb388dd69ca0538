// results/<sweep>/index.csv: one row per run of a sweep (design §6), for pandas and spreadsheets.
//
// Columns: run, hash, status (pending | running | done | failed), then every sweep key that any
// row has (first-seen order), then every final metric that any row has (first-seen order), then
// error (the failure message of a failed run). Cells a run lacks are empty; numbers are written
// in their shortest round-trip form ("nan", "inf" for non-finite ones). Quoting follows RFC 4180.
// The file is replaced atomically, so a reader never sees half an index.
#pragma once
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

}  // namespace amor
