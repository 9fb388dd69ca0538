// The sweep's index.csv (see sweep_index.h).
#include "runner/output/sweep_index.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
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

namespace amor {

std::string sweep_index_id(const SweepIndexRow& row) { return row.run + "-" + row.hash; }

namespace {

// RFC 4180 records: cells separated by commas, records by "\n" (or "\r\n"); a quoted cell may hold
// commas, line breaks and doubled quotes.
std::vector<std::vector<std::string>> csv_records(const std::string& text, const std::string& what) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> rec;
  std::string cur;
  size_t i = 0;
  const size_t n = text.size();
  bool at_cell_start = true;
  while (i < n) {
    const char c = text[i];
    if (at_cell_start && c == '"') {
      ++i;
      for (;;) {
        AMOR_CHECK(i < n, "{}: a quoted cell is not closed", what);
        if (text[i] == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            cur += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        cur += text[i++];
      }
      AMOR_CHECK(i >= n || text[i] == ',' || text[i] == '\n' || text[i] == '\r',
                 "{}: text after a quoted cell", what);
      at_cell_start = false;
      continue;
    }
    if (c == ',') {
      rec.push_back(std::move(cur));
      cur.clear();
      at_cell_start = true;
      ++i;
    } else if (c == '\n' || c == '\r') {
      rec.push_back(std::move(cur));
      cur.clear();
      records.push_back(std::move(rec));
      rec.clear();
      at_cell_start = true;
      i += (c == '\r' && i + 1 < n && text[i + 1] == '\n') ? 2 : 1;
    } else {
      cur += c;
      at_cell_start = false;
      ++i;
    }
  }
  if (!at_cell_start || !cur.empty() || !rec.empty()) {
    rec.push_back(std::move(cur));
    records.push_back(std::move(rec));
  }
  return records;
}

RunStatus status_of(const std::string& s, const std::string& what) {
  for (RunStatus st : {RunStatus::Pending, RunStatus::Running, RunStatus::Done, RunStatus::Failed})
    if (s == to_string(st)) return st;
  throw Error(fmt::format("{}: unknown status '{}'", what, s));
}

// Holds an exclusive flock on a file while alive.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    AMOR_CHECK(fd_ >= 0, "{}: cannot open the lock file: {}", path, std::strerror(errno));
    int rc;
    do rc = ::flock(fd_, LOCK_EX);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      ::close(fd_);
      throw Error(fmt::format("{}: cannot lock: {}", path, std::strerror(err)));
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::vector<SweepIndexRow> parse_sweep_index_csv(const std::string& text, const std::string& what,
                                                 const std::function<bool(const std::string&)>& is_metric) {
  const auto records = csv_records(text, what);
  AMOR_CHECK(!records.empty(), "{}: empty, no header", what);
  const auto& head = records[0];
  AMOR_CHECK(head.size() >= 4 && head[0] == "run" && head[1] == "hash" && head[2] == "status" &&
                 head.back() == "error",
             "{}: the header is not run,hash,status,...,error", what);
  const size_t mid_end = head.size() - 1;
  size_t first_metric = mid_end;
  for (size_t c = 3; c < mid_end; ++c)
    if (is_metric && is_metric(head[c])) {
      first_metric = c;
      break;
    }
  std::vector<SweepIndexRow> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& rec = records[r];
    if (rec.size() == 1 && rec[0].empty()) continue;  // a blank line
    AMOR_CHECK(rec.size() == head.size(), "{}: record {} has {} cells, the header {}", what, r + 1, rec.size(),
               head.size());
    SweepIndexRow row;
    row.run = rec[0];
    row.hash = rec[1];
    row.status = status_of(rec[2], what);
    for (size_t c = 3; c < mid_end; ++c) {
      if (rec[c].empty()) continue;
      if (c < first_metric) {
        row.keys.emplace_back(head[c], rec[c]);
      } else {
        char* end = nullptr;
        const double v = std::strtod(rec[c].c_str(), &end);
        AMOR_CHECK(end && *end == '\0', "{}: record {}: metric '{}' is '{}', not a number", what, r + 1, head[c],
                   rec[c]);
        row.metrics.emplace_back(head[c], v);
      }
    }
    row.error = rec.back();
    rows.push_back(std::move(row));
  }
  return rows;
}

void update_sweep_index(const std::string& dir, const std::vector<SweepIndexRow>& rows, const SweepIndexMerge& merge) {
  sweep_index_csv(rows);  // the given rows alone must make an index (clashing columns throw here)
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AMOR_CHECK(!ec, "{}: cannot create the sweep folder: {}", dir, ec.message());
  const std::filesystem::path path = std::filesystem::path(dir) / "index.csv";
  FileLock lock((std::filesystem::path(dir) / ".index.lock").string());

  std::vector<SweepIndexRow> have;
  if (std::filesystem::is_regular_file(path)) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    AMOR_CHECK(!f.bad(), "{}: cannot be read", path.string());
    auto is_metric = merge.is_metric ? merge.is_metric : [](const std::string& c) { return c == "final_loss"; };
    try {
      have = parse_sweep_index_csv(ss.str(), path.string(), is_metric);
    } catch (const Error& e) {
      std::fprintf(stderr, "amor-run: warning: %s; rewriting it with this job's rows only\n", e.what());
      have.clear();
    }
  }
  // The file's rows, each replaced by this job's row of the same run; then this job's new runs.
  std::map<std::string, size_t> given;
  for (size_t i = 0; i < rows.size(); ++i) given[sweep_index_id(rows[i])] = i;
  std::vector<SweepIndexRow> merged;
  std::set<std::string> placed;
  for (auto& row : have) {
    const std::string id = sweep_index_id(row);
    if (!placed.insert(id).second) continue;  // a duplicate: the first one stays
    auto it = given.find(id);
    if (it != given.end() && !merge.weak.count(id))
      merged.push_back(rows[it->second]);
    else
      merged.push_back(std::move(row));
  }
  for (const auto& row : rows)
    if (placed.insert(sweep_index_id(row)).second) merged.push_back(row);
  // Sweep order first (stable: runs not in `order` keep their place after them).
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < merge.order.size(); ++i) rank.emplace(merge.order[i], i);
  std::stable_sort(merged.begin(), merged.end(), [&](const SweepIndexRow& a, const SweepIndexRow& b) {
    auto ra = rank.find(sweep_index_id(a)), rb = rank.find(sweep_index_id(b));
    const size_t ka = ra == rank.end() ? rank.size() : ra->second;
    const size_t kb = rb == rank.end() ? rank.size() : rb->second;
    return ka < kb;
  });
  std::string text;
  try {
    text = sweep_index_csv(merged);
  } catch (const Error& e) {  // the file's rows clash with this job's (a column changed kind)
    std::fprintf(stderr, "amor-run: warning: %s: %s; rewriting it with this job's rows only\n",
                 path.string().c_str(), e.what());
    text = sweep_index_csv(rows);
  }
  write_file_atomic(path.string(), text);
}

}  // namespace amor
