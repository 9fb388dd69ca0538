// The sweep's index.csv: exact text, read back by pandas (tests/h5_reader_check.py index), atomic
// replacement, and the errors (clashing columns, unwritable folders) naming what is wrong.
#include "runner/output/sweep_index.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "data/json/json.h"
#include "kernels/core/error.h"

namespace amor {
namespace {

namespace fs = std::filesystem;
using json::Array;
using json::Object;
using json::Value;

class SweepIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/amor_sweep_index_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<SweepIndexRow> sample_rows() {
  const double sum = 0.1 + 0.2;  // 0.30000000000000004: needs all 17 digits to round-trip
  return {
      {"amor-gdn", "1a2b3c4d", RunStatus::Done, {{"model.kind", "amor"}, {"train.lr", "0.001"}},
       {{"final_loss", 1.25}, {"mqar/accuracy", 0.875}}, ""},
      {"gdn", "5e6f7a8b", RunStatus::Failed, {{"model.kind", "gdn"}, {"train.lr", "0.0003"}}, {},
       "NaN loss at step 12, \"last good\" checkpoint kept,\nsee log"},
      {"transformer", "99aa00bb", RunStatus::Running, {{"model.kind", "transformer"}, {"seed", "2"}},
       {{"final_loss", sum}, {"mqar/accuracy", std::numeric_limits<double>::quiet_NaN()}}, ""},
      {"mamba2 big", "00000000", RunStatus::Pending, {{"model.kind", " spaced "}}, {}, ""},
  };
}

TEST_F(SweepIndexTest, TextHasOneRowPerRunWithKeysMetricsAndQuoting) {
  const std::string want =
      "run,hash,status,model.kind,train.lr,seed,final_loss,mqar/accuracy,error\n"
      "amor-gdn,1a2b3c4d,done,amor,0.001,,1.25,0.875,\n"
      "gdn,5e6f7a8b,failed,gdn,0.0003,,,,\"NaN loss at step 12, \"\"last good\"\" checkpoint kept,\nsee log\"\n"
      "transformer,99aa00bb,running,transformer,,2,0.30000000000000004,nan,\n"
      "mamba2 big,00000000,pending,\" spaced \",,,,,\n";
  EXPECT_EQ(sweep_index_csv(sample_rows()), want);
  EXPECT_EQ(sweep_index_csv({}), "run,hash,status,error\n");
}

TEST_F(SweepIndexTest, PandasReadsBackEveryCell) {
  write_sweep_index(dir_, sample_rows());
  Value n(nullptr);
  Value want(Object{
      {"columns", Array{"run", "hash", "status", "model.kind", "train.lr", "seed", "final_loss", "mqar/accuracy", "error"}},
      {"rows", Array{Array{"amor-gdn", "1a2b3c4d", "done", "amor", "0.001", n, 1.25, 0.875, n},
                     Array{"gdn", "5e6f7a8b", "failed", "gdn", "0.0003", n, n, n,
                           "NaN loss at step 12, \"last good\" checkpoint kept,\nsee log"},
                     Array{"transformer", "99aa00bb", "running", "transformer", n, "2", 0.1 + 0.2, "nan", n},
                     Array{"mamba2 big", "00000000", "pending", " spaced ", n, n, n, n, n}}}});
  std::string want_path = (fs::path(dir_) / "want.json").string();
  std::ofstream(want_path) << want.dump();
  std::string cmd = fmt::format("{} {}/tests/h5_reader_check.py index {}/index.csv {}", AMOR_PYTHON,
                                AMOR_SOURCE_DIR, dir_, want_path);
  int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
}

TEST_F(SweepIndexTest, RewritesAtomicallyAndCreatesTheFolder) {
  std::string sweep = (fs::path(dir_) / "results" / "quickstart").string();
  auto rows = sample_rows();
  write_sweep_index(sweep, rows);  // creates results/quickstart/
  rows[0].status = RunStatus::Failed;
  rows[0].error = "killed";
  write_sweep_index(sweep, rows);
  EXPECT_EQ(read_text(sweep + "/index.csv"), sweep_index_csv(rows));
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(sweep)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"index.csv"});  // no temporary left behind
}

template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(SweepIndexTest, ClashingColumnsAreErrors) {
  std::vector<SweepIndexRow> rows = {{"a", "h", RunStatus::Done, {{"lr", "1"}, {"lr", "2"}}, {}, ""}};
  EXPECT_EQ(error_of([&] { sweep_index_csv(rows); }), "sweep index: run 'a' has column 'lr' twice");
  rows = {{"a", "h", RunStatus::Done, {{"final_loss", "1"}}, {}, ""},
          {"b", "h", RunStatus::Done, {}, {{"final_loss", 1.0}}, ""}};
  EXPECT_EQ(error_of([&] { sweep_index_csv(rows); }),
            "sweep index: column 'final_loss' is both a sweep key and a metric");
  rows = {{"a", "h", RunStatus::Done, {{"status", "x"}}, {}, ""}};
  EXPECT_EQ(error_of([&] { write_sweep_index(dir_, rows); }),
            "sweep index: column 'status' is both a fixed column and a sweep key");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "index.csv"));
}

TEST_F(SweepIndexTest, UnwritableLocationsNameThePath) {
  std::string file = (fs::path(dir_) / "plain").string();
  std::ofstream(file) << "x";
  std::string under_file = file + "/sweep";
  std::string msg = error_of([&] { write_sweep_index(under_file, sample_rows()); });
  EXPECT_NE(msg.find(under_file + ": cannot create the sweep folder"), std::string::npos) << msg;
  // index.csv exists as a folder: the rename over it fails.
  fs::create_directories(fs::path(dir_) / "index.csv" / "x");
  msg = error_of([&] { write_sweep_index(dir_, sample_rows()); });
  EXPECT_NE(msg.find(dir_ + "/index.csv"), std::string::npos) << msg;
  for (auto& e : fs::directory_iterator(dir_))  // the temporary was cleaned up
    EXPECT_EQ(e.path().filename().string().find(".index.csv.tmp"), std::string::npos) << e.path();
}

bool same_rows(const std::vector<SweepIndexRow>& a, const std::vector<SweepIndexRow>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].run != b[i].run || a[i].hash != b[i].hash || a[i].status != b[i].status || a[i].keys != b[i].keys ||
        a[i].error != b[i].error || a[i].metrics.size() != b[i].metrics.size())
      return false;
    for (size_t m = 0; m < a[i].metrics.size(); ++m) {
      const auto& [na, va] = a[i].metrics[m];
      const auto& [nb, vb] = b[i].metrics[m];
      if (na != nb || !(va == vb || (std::isnan(va) && std::isnan(vb)))) return false;
    }
  }
  return true;
}

bool is_metric(const std::string& c) { return c == "final_loss" || c == "mqar/accuracy"; }

TEST_F(SweepIndexTest, ParsesWhatItWrites) {
  const auto rows = sample_rows();
  EXPECT_TRUE(same_rows(parse_sweep_index_csv(sweep_index_csv(rows), "index.csv", is_metric), rows));
  // Only the first metric column needs naming: every column after it is a metric.
  EXPECT_TRUE(same_rows(parse_sweep_index_csv(sweep_index_csv(rows), "index.csv",
                                              [](const std::string& c) { return c == "final_loss"; }),
                        rows));
  EXPECT_TRUE(parse_sweep_index_csv("run,hash,status,error\n", "x", is_metric).empty());
  EXPECT_EQ(error_of([] { parse_sweep_index_csv("run,hash,status,error\na,b,done\n", "x.csv", is_metric); }),
            "x.csv: record 2 has 3 cells, the header 4");
  EXPECT_EQ(error_of([] { parse_sweep_index_csv("run,hash,status,final_loss,error\na,b,done,abc,\n", "x.csv", is_metric); }),
            "x.csv: record 2: metric 'final_loss' is 'abc', not a number");
  EXPECT_EQ(error_of([] { parse_sweep_index_csv("run,hash,status,error\na,b,odd,\n", "x.csv", is_metric); }),
            "x.csv: unknown status 'odd'");
  EXPECT_EQ(error_of([] { parse_sweep_index_csv("name,x\n", "x.csv", is_metric); }),
            "x.csv: the header is not run,hash,status,...,error");
}

SweepIndexRow row_of(const std::string& run, RunStatus st, double loss, const std::string& seed = "1") {
  return {run, "h" + run, st, {{"train.seed", seed}}, {{"final_loss", loss}}, ""};
}

TEST_F(SweepIndexTest, UpdateMergesRowsByRunAndKeepsTheOthers) {
  SweepIndexMerge m;
  m.is_metric = is_metric;
  m.order = {"a-ha", "b-hb", "c-hc"};
  update_sweep_index(dir_, {row_of("c", RunStatus::Done, 3.0), row_of("a", RunStatus::Failed, NAN)}, m);
  // Another job: b is new, c is given again; "x" is a run of another invocation.
  update_sweep_index(dir_, {row_of("x", RunStatus::Done, 9.0), row_of("b", RunStatus::Done, 2.0),
                            row_of("c", RunStatus::Done, 3.5)}, m);
  // A third job skipped a (DONE elsewhere) and never started b: its weak rows leave the file's.
  m.weak = {"a-ha", "b-hb"};
  update_sweep_index(dir_, {row_of("a", RunStatus::Done, NAN), row_of("b", RunStatus::Pending, NAN)}, m);
  const std::vector<SweepIndexRow> want = {row_of("a", RunStatus::Failed, NAN), row_of("b", RunStatus::Done, 2.0),
                                           row_of("c", RunStatus::Done, 3.5), row_of("x", RunStatus::Done, 9.0)};
  EXPECT_EQ(read_text(dir_ + "/index.csv"), sweep_index_csv(want));
  // A weak row is written when the file has none for its run.
  m.weak = {"d-hd"};
  update_sweep_index(dir_, {row_of("d", RunStatus::Pending, NAN)}, m);
  auto got = parse_sweep_index_csv(read_text(dir_ + "/index.csv"), "index.csv", is_metric);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got.back().run, "d");
}

TEST_F(SweepIndexTest, UnparsableIndexIsReplacedByTheGivenRows) {
  std::ofstream(dir_ + "/index.csv") << "not,an,index\n";
  update_sweep_index(dir_, {row_of("a", RunStatus::Done, 1.0)});
  EXPECT_EQ(read_text(dir_ + "/index.csv"), sweep_index_csv({row_of("a", RunStatus::Done, 1.0)}));
}

// Several processes merge their rows into one index.csv at once (a job array's tasks): none of
// them loses another's rows, and each run's row is its writer's last.
TEST_F(SweepIndexTest, ConcurrentWritersLoseNoRow) {
  constexpr int kWriters = 4, kRowsEach = 3, kRounds = 60;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        SweepIndexMerge m;
        m.is_metric = is_metric;
        for (int round = 1; round <= kRounds; ++round) {
          std::vector<SweepIndexRow> rows;
          for (int j = 0; j < kRowsEach; ++j)
            rows.push_back(row_of(fmt::format("w{}r{}", w, j), RunStatus::Done, round, std::to_string(w)));
          update_sweep_index(dir_, rows, m);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        rc = 1;
      }
      std::_Exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto rows = parse_sweep_index_csv(read_text(dir_ + "/index.csv"), "index.csv", is_metric);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kWriters * kRowsEach));
  std::set<std::string> runs;
  for (const auto& r : rows) {
    runs.insert(r.run);
    ASSERT_EQ(r.metrics.size(), 1u) << r.run;
    EXPECT_EQ(r.metrics[0].second, kRounds) << r.run;  // the writer's last round
  }
  EXPECT_EQ(runs.size(), static_cast<size_t>(kWriters * kRowsEach));
  for (auto& e : fs::directory_iterator(dir_)) {  // no temporary left behind
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "index.csv" || name == ".index.lock") << name;
  }
}

TEST(RunStatus, Names) {
  EXPECT_STREQ(to_string(RunStatus::Pending), "pending");
  EXPECT_STREQ(to_string(RunStatus::Running), "running");
  EXPECT_STREQ(to_string(RunStatus::Done), "done");
  EXPECT_STREQ(to_string(RunStatus::Failed), "failed");
}

}  // namespace
}  // namespace amor
