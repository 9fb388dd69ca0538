#include "runner/app/run_folder.h"

#include <fstream>
#include <sstream>

#include "kernels/core/error.h"
#include "models/io/safetensors.h"
#include "runner/config/canonical.h"
#include "runner/output/run_file.h"
#include "runner/train/checkpoints.h"

namespace amor {

namespace fs = std::filesystem;

namespace {

// An error if the same run name already holds another config, or the folder's config differs.
void check_run_folder(const config::RunSpec& spec, const fs::path& output) {
  const fs::path sweep_dir = output / spec.sweep;
  if (!fs::is_directory(sweep_dir)) return;
  for (const auto& e : fs::directory_iterator(sweep_dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n == spec.id()) continue;
    const bool has_work = fs::exists(e.path() / "DONE") || fs::exists(e.path() / "run.h5") ||
                          fs::exists(e.path() / "checkpoints");
    if (has_work && n.size() == spec.name.size() + 9 && n.rfind(spec.name + "-", 0) == 0)
      throw Error(fmt::format(
          "run '{}': {} holds this run with another config (hash {} there, {} now); the config "
          "changed since it ran. Delete or move that folder to start over, or rename the run",
          spec.name, e.path().string(), n.substr(spec.name.size() + 1), spec.hash8));
  }
  const fs::path cfg = spec.dir(output) / "config.json";
  if (fs::exists(cfg)) {
    std::ifstream f(cfg);
    std::stringstream ss;
    ss << f.rdbuf();
    AMOR_CHECK(ss.str() == spec.canonical + "\n",
               "run '{}': {} differs from this run's resolved config; delete the folder to start over",
               spec.id(), cfg.string());
  }
}

// run.h5 holds the history a checkpoint does not (every earlier training row and evaluation), so
// a run resumes only with it: missing, a resume would write a run.h5 that starts at the
// checkpoint's step; unreadable, it is left as it is for the user to restore or remove.
void check_run_file(const config::RunSpec& spec, const fs::path& dir) {
  const fs::path h5 = dir / "run.h5";
  const std::vector<int64_t> steps = Checkpoints(dir / "checkpoints", 1).steps();
  if (fs::exists(h5)) {
    try {
      RunFile::check_readable(h5.string());
    } catch (const Error& e) {
      throw Error(fmt::format(
          "run '{}': {}. amor-run leaves it untouched. Restore it from a copy to {}, or move it "
          "away{} to start the run over",
          spec.id(), e.what(), steps.empty() ? "resume" : "resume from the checkpoints",
          steps.empty() ? "" : fmt::format(" together with {}", (dir / "checkpoints").string())));
    }
  } else if (!steps.empty()) {
    throw Error(fmt::format(
        "run '{}': {} is missing but the run has checkpoints up to step {} in {}: resuming would "
        "write a run.h5 without the history of steps 1-{}. Restore run.h5, or delete {} (or the "
        "whole run folder) to start the run over",
        spec.id(), h5.string(), steps.back(), (dir / "checkpoints").string(), steps.back(),
        (dir / "checkpoints").string()));
  }
}

}  // namespace

void prepare_run_folder(const config::RunSpec& spec, const fs::path& output, std::optional<RunLock>& lock) {
  const fs::path dir = spec.dir(output);
  check_run_folder(spec, output);
  fs::create_directories(dir);
  lock.emplace(dir);
  check_run_file(spec, dir);
  if (!fs::exists(dir / "config.json")) {
    write_file_atomic((dir / "config.json").string(), spec.canonical + "\n");
    write_file_atomic((dir / "config.yaml").string(), config::canonical_yaml(spec.config));
  }
}

}  // namespace amor
