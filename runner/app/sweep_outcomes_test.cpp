// The exit status of an invocation from its runs' outcomes (README "Stopping and requeueing"): a
// stopped run always makes it 75, so the batch template requeues, whatever the other runs did.
#include "runner/app/sweep_outcomes.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace amor
