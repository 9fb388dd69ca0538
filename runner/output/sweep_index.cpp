// The sweep's index.csv (see sweep_index.h).
#include "runner/output/sweep_index.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "kernels/core/error.h"
#include "models/io/safetensors.h"

namespace amor {

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::Pending: return "pending";
    case RunStatus::Running: return "running";
    case RunStatus::Done: return "done";
    case RunStatus::Failed: return "failed";
  }
  return "?";
}

namespace {

// RFC 4180: quote a cell holding a comma, quote or line break (or edge spaces, which some readers
// would strip), doubling the quotes inside.
std::string cell(const std::string& s) {
  bool quote = s.find_first_of(",\"\r\n") != std::string::npos ||
               (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

// Adds name to the column list once; a name already taken by another kind of column is an error.
void add_column(std::vector<std::string>& cols, std::map<std::string, std::string>& kind_of,
                const std::string& name, const std::string& kind) {
  auto [it, fresh] = kind_of.emplace(name, kind);
  AMOR_CHECK(it->second == kind, "sweep index: column '{}' is both a {} and a {}", name, it->second, kind);
  if (fresh) cols.push_back(name);
}

}  // namespace

std::string sweep_index_csv(const std::vector<SweepIndexRow>& rows) {
  std::map<std::string, std::string> kind_of = {
      {"run", "fixed column"}, {"hash", "fixed column"}, {"status", "fixed column"}, {"error", "fixed column"}};
  std::vector<std::string> keys, metrics;
  for (const auto& r : rows) {
    std::set<std::string> in_row;
    for (const auto& [k, v] : r.keys) {
      AMOR_CHECK(in_row.insert(k).second, "sweep index: run '{}' has column '{}' twice", r.run, k);
      add_column(keys, kind_of, k, "sweep key");
    }
    for (const auto& [k, v] : r.metrics) {
      AMOR_CHECK(in_row.insert(k).second, "sweep index: run '{}' has column '{}' twice", r.run, k);
      add_column(metrics, kind_of, k, "metric");
    }
  }
  std::string out = "run,hash,status";
  for (const auto& k : keys) out += "," + cell(k);
  for (const auto& m : metrics) out += "," + cell(m);
  out += ",error\n";
  for (const auto& r : rows) {
    out += cell(r.run) + "," + cell(r.hash) + "," + to_string(r.status);
    for (const auto& k : keys) {
      out += ",";
      for (const auto& [name, v] : r.keys)
        if (name == k) out += cell(v);
    }
    for (const auto& m : metrics) {
      out += ",";
      for (const auto& [name, v] : r.metrics)
        if (name == m) out += fmt::format("{}", v);
    }
    out += "," + cell(r.error) + "\n";
  }
  return out;
}

void write_sweep_index(const std::string& dir, const std::vector<SweepIndexRow>& rows) {
  std::string text = sweep_index_csv(rows);  // before touching the disk: a bad index writes nothing
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AMOR_CHECK(!ec, "{}: cannot create the sweep folder: {}", dir, ec.message());
  write_file_atomic((std::filesystem::path(dir) / "index.csv").string(), text);
}

}  // namespace amor
