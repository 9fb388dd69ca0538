#include "runner/app/shard.h"

#include <fmt/format.h>

#include <cstdlib>

#include "kernels/core/error.h"

namespace amor {

namespace {

// A whole decimal number (optional sign) that fits int64; nullopt otherwise.
std::optional<int64_t> whole(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  return std::strtoll(s.c_str(), nullptr, 10);
}

Shard from_slurm(const EnvLookup& env) {
  auto get = [&](const char* name) -> std::optional<int64_t> {
    const auto v = env(name);
    if (!v) return std::nullopt;
    const auto n = whole(*v);
    AMOR_CHECK(n.has_value(), "--shard slurm: {}='{}' is not a whole number", name, *v);
    return n;
  };
  const auto id = get("SLURM_ARRAY_TASK_ID");
  AMOR_CHECK(id.has_value(),
             "--shard slurm: SLURM_ARRAY_TASK_ID is not set: this is not a task of a Slurm job array "
             "(submit with sbatch --array=0-N, or give --shard i/n)");
  const auto min = get("SLURM_ARRAY_TASK_MIN"), max = get("SLURM_ARRAY_TASK_MAX");
  const auto step_v = get("SLURM_ARRAY_TASK_STEP"), count_v = get("SLURM_ARRAY_TASK_COUNT");
  AMOR_CHECK(min.has_value() && (count_v.has_value() || max.has_value()),
             "--shard slurm: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT "
             "(or SLURM_ARRAY_TASK_MAX) are not; give --shard i/n");
  const int64_t step = step_v.value_or(1);
  AMOR_CHECK(step >= 1, "--shard slurm: SLURM_ARRAY_TASK_STEP={} is below 1", step);
  const std::string vars = fmt::format("SLURM_ARRAY_TASK_ID={} MIN={} MAX={} STEP={} COUNT={}", *id, *min,
                                       max ? std::to_string(*max) : "unset", step,
                                       count_v ? std::to_string(*count_v) : "unset");
  const int64_t count = count_v ? *count_v : (*max - *min) / step + 1;
  AMOR_CHECK(*id >= *min && (*id - *min) % step == 0 && (!max || (*max - *min) / step + 1 == count),
             "--shard slurm: the array's task ids are not min, min+step, ..., max ({}): with an irregular "
             "--array list give each task --shard i/n",
             vars);
  const int64_t index = (*id - *min) / step;
  AMOR_CHECK(count >= 1 && index < count, "--shard slurm: task {} of {} tasks is out of range ({})", index,
             count, vars);
  return {index, count};
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

Shard parse_shard(const std::string& value, const EnvLookup& env) {
  if (value == "slurm") return from_slurm(env);
  const size_t slash = value.find('/');
  const auto i = slash == std::string::npos ? std::nullopt : whole(value.substr(0, slash));
  const auto n = slash == std::string::npos ? std::nullopt : whole(value.substr(slash + 1));
  AMOR_CHECK(i && n, "--shard '{}': expected i/n (this job's shard i of n, 0 <= i < n, e.g. 0/4) or 'slurm'",
             value);
  AMOR_CHECK(*n >= 1, "--shard '{}': the shard count n must be at least 1", value);
  AMOR_CHECK(*i >= 0 && *i < *n, "--shard '{}': the shard index i must be in [0, {}) (shards are numbered from 0)",
             value, *n);
  return {*i, *n};
}

}  // namespace amor
