// --shard: i/n and slurm parsing, the errors that name the option, and the deal of runs to shards.
#include "runner/app/shard.h"

#include <gtest/gtest.h>

#include <map>

#include "kernels/core/error.h"

namespace amor {
namespace {

std::string error_of(const std::string& v, std::map<std::string, std::string> vars = {}) {
  try {
    parse_shard(v, env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Shard, ParsesIndexOverCount) {
  const Shard s = parse_shard("2/5", env_of({}));
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(s.str(), "2/5");
  EXPECT_EQ(parse_shard("0/1", env_of({})).count, 1);
}

TEST(Shard, BadValuesNameTheOption) {
  EXPECT_EQ(error_of("2/2"), "--shard '2/2': the shard index i must be in [0, 2) (shards are numbered from 0)");
  EXPECT_EQ(error_of("-1/2"), "--shard '-1/2': the shard index i must be in [0, 2) (shards are numbered from 0)");
  EXPECT_EQ(error_of("0/0"), "--shard '0/0': the shard count n must be at least 1");
  for (const char* bad : {"", "1", "a/b", "1/", "/2", "1/2/3", "1.5/2", "0x1/2", "1 /2", "99999999999999999999/2"})
    EXPECT_EQ(error_of(bad), fmt::format("--shard '{}': expected i/n (this job's shard i of n, 0 <= i < n, e.g. "
                                         "0/4) or 'slurm'", bad)) << bad;
}

TEST(Shard, SlurmArrays) {
  auto s = parse_shard("slurm", env_of({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                        {"SLURM_ARRAY_TASK_MAX", "7"}, {"SLURM_ARRAY_TASK_COUNT", "8"}}));
  EXPECT_EQ(s.str(), "3/8");
  s = parse_shard("slurm", env_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "1"},
                                   {"SLURM_ARRAY_TASK_MAX", "8"}}));  // no COUNT: from MIN/MAX
  EXPECT_EQ(s.str(), "0/8");
  s = parse_shard("slurm", env_of({{"SLURM_ARRAY_TASK_ID", "14"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                   {"SLURM_ARRAY_TASK_MAX", "14"}, {"SLURM_ARRAY_TASK_STEP", "2"},
                                   {"SLURM_ARRAY_TASK_COUNT", "8"}}));
  EXPECT_EQ(s.str(), "7/8");
}

TEST(Shard, SlurmErrors) {
  EXPECT_NE(error_of("slurm").find("--shard slurm: SLURM_ARRAY_TASK_ID is not set"), std::string::npos);
  EXPECT_NE(error_of("slurm", {{"SLURM_ARRAY_TASK_ID", "2"}}).find("SLURM_ARRAY_TASK_MIN"), std::string::npos);
  EXPECT_EQ(error_of("slurm", {{"SLURM_ARRAY_TASK_ID", "x"}}), "--shard slurm: SLURM_ARRAY_TASK_ID='x' is not a whole number");
  // --array=1,3,7: three tasks whose ids are not min, min+1, ...
  EXPECT_NE(error_of("slurm", {{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "1"},
                               {"SLURM_ARRAY_TASK_MAX", "7"}, {"SLURM_ARRAY_TASK_COUNT", "3"}})
                .find("irregular --array list give each task --shard i/n"),
            std::string::npos);
}

TEST(Shard, DealsRunsRoundRobin) {
  const Shard a{0, 3}, b{1, 3}, c{2, 3};
  int seen = 0;
  for (size_t run = 0; run < 10; ++run) {
    EXPECT_EQ(a.holds(run) + b.holds(run) + c.holds(run), 1) << run;  // each run in exactly one shard
    seen += a.holds(run);
  }
  EXPECT_EQ(seen, 4);  // runs 0, 3, 6, 9
}

}  // namespace
}  // namespace amor
