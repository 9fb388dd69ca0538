// --threads: where the count comes from, and that it reaches OpenBLAS.
#include "runner/app/threads.h"

#include <gtest/gtest.h>

#include <map>

namespace amor {
namespace {

TEST(Threads, ExplicitCountWins) {
  auto c = choose_threads(3, env_of({{"OPENBLAS_NUM_THREADS", "8"}}), 16, 2);
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.why, "--threads");
}

TEST(Threads, AutoTakesTheEnvironmentThenTheNodesCpus) {
  EXPECT_EQ(choose_threads(0, env_of({{"OPENBLAS_NUM_THREADS", "4"}, {"OMP_NUM_THREADS", "2"}}), 16, 2).threads, 4);
  auto c = choose_threads(0, env_of({{"OMP_NUM_THREADS", "6,2"}}), 16, 2);
  EXPECT_EQ(c.threads, 6);
  EXPECT_EQ(c.why, "auto: OMP_NUM_THREADS");
  // Unusable values are passed over.
  c = choose_threads(0, env_of({{"OPENBLAS_NUM_THREADS", "0"}, {"OMP_NUM_THREADS", "x"}}), 16, 4);
  EXPECT_EQ(c.threads, 4);
  EXPECT_EQ(c.why, "auto: 16 CPUs / 4 ranks on the node");
  EXPECT_EQ(choose_threads(0, env_of({}), 2, 8).threads, 1);  // ranks share a core: 1 each
  EXPECT_EQ(choose_threads(0, env_of({}), 1, 1).why, "auto: 1 CPU / 1 rank on the node");
}

TEST(Threads, ReachOpenBlas) {
  EXPECT_EQ(apply_threads(2), 2);
  EXPECT_EQ(apply_threads(1), 1);
  EXPECT_STREQ(std::getenv("OPENBLAS_NUM_THREADS"), "1");
  EXPECT_GE(affinity_cpus(), 1);
}

}  // namespace
}  // namespace amor
