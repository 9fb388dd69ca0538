// The sweep's index.csv: exact text, read back by pandas (tests/h5_reader_check.py index), atomic
// replacement, and the errors (clashing columns, unwritable folders) naming what is wrong.
#include "runner/output/sweep_index.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

TEST(RunStatus, Names) {
  EXPECT_STREQ(to_string(RunStatus::Pending), "pending");
  EXPECT_STREQ(to_string(RunStatus::Running), "running");
  EXPECT_STREQ(to_string(RunStatus::Done), "done");
  EXPECT_STREQ(to_string(RunStatus::Failed), "failed");
}

}  // namespace
}  // namespace amor
