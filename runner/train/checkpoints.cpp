#include "runner/train/checkpoints.h"

#include <algorithm>
#include <cstdio>

#include "kernels/core/error.h"
#include "runner/dist/communicator.h"

namespace amor {

namespace fs = std::filesystem;

fs::path Checkpoints::folder(int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return dir_ / name;
}

std::vector<int64_t> Checkpoints::steps() const {
  std::vector<int64_t> out;
  if (!fs::is_directory(dir_)) return out;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 13 || name.rfind("step-", 0) != 0 || !e.is_directory()) continue;
    if (!fs::exists(e.path() / "fsdp.json")) continue;  // not a finished checkpoint
    out.push_back(std::stoll(name.substr(5)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<fs::path> Checkpoints::latest() const {
  auto s = steps();
  if (s.empty()) return std::nullopt;
  return folder(s.back());
}

void Checkpoints::save(int64_t step, dist::Communicator& comm,
                       const std::function<void(const std::string&)>& write) {
  const fs::path final_dir = folder(step);
  const fs::path partial = final_dir.string() + ".partial";
  if (comm.rank() == 0) {
    fs::create_directories(dir_);
    fs::remove_all(partial);
    fs::create_directories(partial);
  }
  comm.barrier();
  write(partial.string());
  comm.barrier();
  if (comm.rank() == 0) {
    fs::remove_all(final_dir);  // a step saved twice (stop request on a checkpoint step)
    fs::rename(partial, final_dir);
    auto s = steps();
    for (size_t i = 0; i + static_cast<size_t>(std::max<int64_t>(1, keep_)) < s.size(); ++i)
      fs::remove_all(folder(s[i]));
  }
  comm.barrier();
}

void resume_from_checkpoint(const Checkpoints& ckpts, dist::Communicator& comm,
                            const std::function<void(const fs::path&)>& load) {
  const std::vector<int64_t> steps = ckpts.steps();
  std::vector<std::pair<fs::path, std::string>> damaged;  // newest first
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const fs::path dir = ckpts.folder(*it);
    try {
      load(dir);
    } catch (const Error& e) {
      if (!dist::comm_failure().empty()) throw;
      damaged.emplace_back(dir, e.what());
      continue;
    }
    if (comm.rank() == 0) {
      for (const auto& [bad, why] : damaged) {
        fs::path aside = bad.string() + ".corrupt";
        for (int n = 2; fs::exists(aside); ++n) aside = bad.string() + ".corrupt-" + std::to_string(n);
        fs::rename(bad, aside);
        std::fprintf(stderr,
                     "amor-run: warning: checkpoint %s cannot be loaded (%s); moved to %s, resuming "
                     "from the older %s\n",
                     bad.string().c_str(), why.c_str(), aside.string().c_str(), dir.string().c_str());
      }
      std::fflush(stderr);
    }
    comm.barrier();  // the renames are done before any rank saves a checkpoint again
    return;
  }
  AMOR_CHECK(!damaged.empty(), "resume: no complete checkpoint under the run's checkpoints/");
  std::string msg = damaged.front().second;
  if (damaged.size() > 1)
    msg += fmt::format(" (and the {} older checkpoint{} could not be loaded either; nothing was "
                       "renamed. Delete the run folder's checkpoints/ and run.h5 to start over)",
                       damaged.size() - 1, damaged.size() == 2 ? "" : "s");
  throw Error(msg);
}

}  // namespace amor
