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
  // No run has MQAR or a validation loss: those columns are left out; the transformer's fire
  // cell is blank.
  EXPECT_NE(table.find("      loss     fire\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("recall"), std::string::npos) << table;
  EXPECT_NE(table.find("0.250"), std::string::npos) << table;
  std::ifstream in(dir / "s" / "index.csv");
  std::stringstream csv;
  csv << in.rdbuf();
  EXPECT_NE(csv.str().find("fire_rate"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find("0.25"), std::string::npos) << csv.str();
  std::filesystem::remove_all(dir);
}

// Issue #16 §4: a text task's score means nothing for a model trained on MQAR: blank in the
// summary, absent from index.csv; a column no run has is left out of the summary.
TEST(SweepOutcomes, ColumnsOnlyForRunsTheyMeanSomethingFor) {
  config::RunSpec mq;
  mq.sweep = "c";
  mq.name = "mqar-gdn";
  mq.hash8 = "0000aaaa";
  mq.config.model.kind = "gdn";
  mq.config.data.source = "mqar";
  mq.config.eval.tasks = {"mqar", "ppl_by_position"};
  config::RunSpec co = mq;
  co.name = "corpus-gdn";
  co.hash8 = "0000bbbb";
  co.config.data.source = "corpus";
  EXPECT_FALSE(eval_column_applies(mq.config, "ppl_by_position_ppl"));
  EXPECT_TRUE(eval_column_applies(co.config, "ppl_by_position_ppl"));
  EXPECT_TRUE(recall_applies(co.config));
  const auto cols = eval_columns(co.config);
  ASSERT_EQ(cols.size(), 1u);  // mqar has the recall column
  RunResult res;
  res.status = TrainStatus::Done;
  res.metrics = {{"final_loss", 2.5}, {"valid_loss", 2.75}, {"mqar_acc", 0.5}, {cols[0], 123.0}};
  std::vector<Outcome> outs = {outcome_of(mq, res), outcome_of(co, res)};
  for (auto& o : outs) o.model = {NAN};  // no gates
  const auto dir = std::filesystem::temp_directory_path() / "amor_sweep_outcomes_cols_test";
  std::filesystem::remove_all(dir);
  auto table_of = [&](const std::vector<config::RunSpec>& runs, const std::vector<Outcome>& o) {
    testing::internal::CaptureStdout();
    report_outcomes(runs, o, dir, runs);
    return testing::internal::GetCapturedStdout();
  };
  std::string table = table_of({mq, co}, outs);
  EXPECT_NE(table.find("recall ppl_by_position"), std::string::npos) << table;
  EXPECT_EQ(table.find("fire"), std::string::npos) << table;  // no run has gates
  EXPECT_NE(table.find("mqar-gdn-0000aaaa"), std::string::npos) << table;
  const std::string mq_line = table.substr(table.find("mqar-gdn-0000aaaa"));
  EXPECT_EQ(mq_line.substr(0, mq_line.find('\n')).find("123"), std::string::npos) << table;
  EXPECT_NE(table.find("123.000"), std::string::npos) << table;  // the corpus run's
  std::ifstream in(dir / "c" / "index.csv");
  std::stringstream csv;
  csv << in.rdbuf();
  const std::string text = csv.str();
  const std::string mq_row = text.substr(text.find("mqar-gdn,"));
  EXPECT_EQ(mq_row.substr(0, mq_row.find('\n')).find("123"), std::string::npos) << text;
  // Only MQAR runs: the ppl column is left out of the summary.
  std::filesystem::remove_all(dir);
  table = table_of({mq}, {outs[0]});
  EXPECT_EQ(table.find("ppl_by_position"), std::string::npos) << table;
  EXPECT_NE(table.find("recall"), std::string::npos) << table;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace amor
