// `--shard i/n`: one of n independent amor-run jobs (a Slurm job array's tasks) that split a
// sweep's runs between them. Run k of the expanded runs (sweep order, after --only) belongs to
// shard k mod n: deterministic, the same in every job given the same sweep files, overrides and
// --only, and balanced (shard sizes differ by at most one).
// `--shard slurm` takes i and n from the Slurm job array the job belongs to: i = (SLURM_ARRAY_TASK_ID
// - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP, n = SLURM_ARRAY_TASK_COUNT (so `--array=0-7`,
// `--array=1-8` and `--array=0-14:2` are each 8 shards). Without --shard a job runs every run,
// also inside a job array: splitting is only ever asked for explicitly.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "runner/app/env_lookup.h"

namespace amor {

struct Shard {
  int64_t index = 0;  // i, 0 <= i < count
  int64_t count = 1;  // n >= 1
  bool holds(size_t run) const { return static_cast<int64_t>(run % static_cast<size_t>(count)) == index; }
  std::string str() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// Parses the value of --shard ("i/n" or "slurm"; env reads the environment, nullopt for unset).
// Throws amor::Error with a message that names --shard, the value and what is expected.
Shard parse_shard(const std::string& value, const EnvLookup& env);

}  // namespace amor
