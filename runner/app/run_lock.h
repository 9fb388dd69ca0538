// An exclusive lock on a run folder for the lifetime of one amor-run training it, so that two
// invocations (two sbatch jobs of the same sweep, a resubmission while the first still runs)
// never write the same run.h5 and checkpoints at once.
//
// flock(2) on <run dir>/.lock: the kernel releases it when the holder exits, however it exits
// (kill -9 included), so a stale lock cannot outlive its process and needs no clean-up. The file
// holds "pid host start-time" of the holder, for the message the second invocation prints.
#pragma once
#include <filesystem>
#include <string>

namespace amor {

class RunLock {
 public:
  // Takes the lock or throws amor::Error naming the folder and the holder.
  explicit RunLock(const std::filesystem::path& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace amor
