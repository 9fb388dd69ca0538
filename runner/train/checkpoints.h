// A run's checkpoint folders: <run>/checkpoints/step-00000100/, each complete or absent.
//
// Every rank writes into step-N.partial (its shard file; rank 0 also the metadata), then after a
// barrier rank 0 renames it to step-N — a rename is atomic, so a crash or kill at any moment
// leaves the previous checkpoints intact and at most a .partial folder that the next save
// replaces. Only the newest `keep` checkpoints are kept.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runner/dist/communicator.h"

namespace amor {

class Checkpoints {
 public:
  Checkpoints(std::filesystem::path dir, int64_t keep) : dir_(std::move(dir)), keep_(keep) {}
  // The newest complete checkpoint folder, if any.
  std::optional<std::filesystem::path> latest() const;
  std::vector<int64_t> steps() const;  // complete checkpoints, oldest first
  std::filesystem::path folder(int64_t step) const;
  // Collective over the run's ranks; write(dir) writes this rank's part into dir.
  void save(int64_t step, dist::Communicator& comm, const std::function<void(const std::string&)>& write);

 private:
  std::filesystem::path dir_;
  int64_t keep_;
};

// Resumes from the newest checkpoint that loads: load(dir) is tried on the complete checkpoints,
// newest first, on every rank of the run (collective; load must fail on every rank alike, as
// Fsdp::load does). Checkpoints newer than the one that loaded are damaged (a truncated or
// garbled file): rank 0 renames each to step-N.corrupt (kept for inspection; out of the way of
// later saves and of `keep` pruning) and warns naming it. When none loads nothing is renamed and
// the newest one's error is thrown; a communicator failure is rethrown at once.
void resume_from_checkpoint(const Checkpoints& ckpts, dist::Communicator& comm,
                            const std::function<void(const std::filesystem::path&)>& load);

}  // namespace amor
