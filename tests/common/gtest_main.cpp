// The main of every amor_add_test binary: GoogleTest's own, except that a binary whose every test
// skipped exits 77, which CTest reports as "Skipped" (tests/common/skip_status.h says why).
#include <cstdio>

#include "tests/common/skip_status.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int status = amor::testing::skip_aware_status(RUN_ALL_TESTS());
  if (status == amor::testing::kSkipExitCode)
    std::printf("every test skipped: exit status %d (CTest: Skipped)\n", status);
  return status;
}
