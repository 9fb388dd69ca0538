// The exit status of an invocation from its runs' outcomes (README "Stopping and requeueing"): a
// stopped run always makes it 75, so the batch template requeues, whatever the other runs did.
#include "runner/app/sweep_outcomes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runner/train/stop_signal.h"

namespace amor {
namespace {

TEST(ExitStatus, AStoppedRunIsAlwaysRequeued) {
  // Outcome::status: 0 never started, 1 done, 2 skipped (DONE), 3 stopped, 4 failed.
  EXPECT_EQ(exit_status_of({}), 0);
  EXPECT_EQ(exit_status_of({1, 2, 1}), 0);
  EXPECT_EQ(exit_status_of({1, 4}), 1);
  EXPECT_EQ(exit_status_of({3, 1}), kRequeueExitCode);
  EXPECT_EQ(exit_status_of({4, 3}), kRequeueExitCode);     // failed, then another run stopped
  EXPECT_EQ(exit_status_of({3, 4, 2}), kRequeueExitCode);  // stopped, then another run failed
  EXPECT_EQ(exit_status_of({4, 0}), kRequeueExitCode);     // a run left unstarted by the stop
  EXPECT_EQ(kRequeueExitCode, 75);
}

// The model's summary metrics (its kind's, models/lm/model_kinds.h) reach the summary table and
// index.csv by their names; the runner names none of them.
TEST(SweepOutcomes, ModelSummaryMetricsComeFromTheKind) {
  config::RunSpec amor;
  amor.sweep = "s";
  amor.name = "amor";
  amor.hash8 = "0000aaaa";
  amor.config.model.kind = "amor";
  config::RunSpec tr = amor;
  tr.name = "tr";
  tr.hash8 = "0000bbbb";
  tr.config.model.kind = "transformer";
  ASSERT_EQ(model_summary(amor.config).size(), 1u);
  EXPECT_EQ(model_summary(amor.config)[0].name, "fire_rate");
  RunResult res;
  res.status = TrainStatus::Done;
  res.metrics = {{"final_loss", 2.5}, {"fire_rate", 0.25}};
  std::vector<Outcome> outs = {outcome_of(amor, res), outcome_of(tr, res)};
  outs[1].model = {NAN};  // a run without gates reports no fire rate
  ASSERT_EQ(outs[0].model, std::vector<double>{0.25});
  const auto dir = std::filesystem::temp_directory_path() / "amor_sweep_outcomes_test";
  std::filesystem::remove_all(dir);
  testing::internal::CaptureStdout();
  EXPECT_EQ(report_outcomes({amor, tr}, outs, dir, {amor, tr}), 0);
  const std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("recall     fire"), std::string::npos) << table;
  EXPECT_NE(table.find("0.250"), std::string::npos) << table;
  std::ifstream in(dir / "s" / "index.csv");
  std::stringstream csv;
  csv << in.rdbuf();
  EXPECT_NE(csv.str().find("fire_rate"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find("0.25"), std::string::npos) << csv.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace amor
