// CTest's "Skipped" for GoogleTest binaries whose tests could not run here (no GPU, no MPI peer, a
// Debian package missing): GoogleTest itself exits 0 for a skipped test, so CTest would report
// the binary as passed and CI's summary would hide what did not run.
//
// The rule: a binary exits kSkipExitCode (CTest's SKIP_RETURN_CODE, set by amor_add_test and the
// MPI tests' registration) only when every test it ran skipped and none failed. A binary where
// some tests ran reports their real result; its skipped tests are listed in its output. Binaries
// that mix checks which need a GPU or package with checks which run anywhere register the latter
// as their own CTest test (amor_add_test's ALWAYS_RUN), so the rest still shows as skipped.
#pragma once
#include <gtest/gtest.h>

namespace amor::testing {

constexpr int kSkipExitCode = 77;

// True when the finished run had tests, all skipped, none failed.
inline bool all_tests_skipped() {
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  return u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count() &&
         u.failed_test_count() == 0;
}

// RUN_ALL_TESTS()'s result turned into the process's exit status.
inline int skip_aware_status(int run_all_tests_result) {
  if (run_all_tests_result != 0) return run_all_tests_result;
  return all_tests_skipped() ? kSkipExitCode : 0;
}

}  // namespace amor::testing
