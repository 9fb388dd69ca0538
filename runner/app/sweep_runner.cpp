#include "runner/app/sweep_runner.h"

#include "runner/app/run_lock.h"
#include "runner/app/preset_resolve.h"

#include <fnmatch.h>
#include <unistd.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "models/presets/param_count.h"
#include "models/presets/presets.h"
#include "models/core/config_json.h"
#include "models/io/model_weights.h"
#include "models/io/safetensors.h"
#include "models/lm/language_model.h"
#include "runner/config/canonical.h"
#include "runner/config/config_error.h"
#include "runner/config/eval_checks.h"
#include "runner/config/sweep.h"
#include "runner/dist/mpi_communicator.h"
#include "runner/eval/run_config_tasks.h"
#include "runner/output/run_file.h"
#include "runner/output/sweep_index.h"
#include "runner/train/checkpoints.h"
#include "runner/train/data_setup.h"
#include "runner/train/stop_signal.h"
#include "runner/train/trainer.h"

namespace amor {

namespace fs = std::filesystem;

namespace {

// Per run, what its group reports back to world rank 0.
struct Outcome {
  int status = 0;  // 0 pending, 1 done, 2 skipped (already DONE), 3 stopped, 4 failed
  double final_loss = NAN, valid_loss = NAN, mqar_acc = NAN, fire_rate = NAN;
  std::string message;
  std::vector<double> evals;  // the run's eval_columns, in order
};

// The evaluation scores a run reports in the summary and index.csv: "<task>_<headline metric>"
// per harness task (mqar's accuracy has its own column, mqar_acc).
std::vector<std::string> eval_columns(const config::RunConfig& cfg) {
  std::vector<std::string> cols;
  for (const auto& t : eval::harness_tasks(cfg))
    if (t != "mqar") cols.push_back(t + "_" + eval::headline_metric(t));
  return cols;
}

double metric(const std::map<std::string, double>& m, const char* k) {
  auto it = m.find(k);
  return it == m.end() ? NAN : it->second;
}

// The folder of a run, or an error if the same run name already holds another config.
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

// After a communicator failure (a peer rank hung or died mid-collective) this process holds a
// collective that can never complete: the group's next collective, the outcome exchange below and
// MPI_Finalize would all wait on the missing peer forever. So the job ends here, with the reason,
// on whichever rank saw it; MPI_Abort makes mpirun end every rank, a stopped one included.
[[noreturn]] void abort_job_on_comm_failure(const config::RunSpec& spec, int world_rank, const std::string& what) {
  std::fprintf(stderr,
               "amor-run: run %s failed on world rank %d: %s\n"
               "amor-run: aborting the job (MPI_Abort): a communicator failed, so the ranks cannot "
               "finish together. Runs not DONE resume from their last checkpoint when the same "
               "command runs again\n",
               spec.id().c_str(), world_rank, what.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; this is for the compiler
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

// Every eval.weights file of the runs still to do is read (names and shapes against the run's
// model) by world rank 0 before anything is created, so a path that does not exist or a file that
// does not fit is refused like a bad config (exit 2) and leaves no folder, config or index.csv
// behind. Each (file, model) pair is read once; the runs read their file again when they start.
// Returns the first problem, "" when all load.
std::string check_eval_weights(const std::vector<config::RunSpec>& runs, const fs::path& output) {
  std::set<std::string> checked;
  for (const auto& r : runs) {
    const config::RunConfig& cfg = r.config;
    if (cfg.eval.weights.empty() || fs::exists(r.dir(output) / "DONE")) continue;
    if (!checked.insert(cfg.eval.weights + "\n" + model::to_json(cfg.model).dump()).second) continue;
    try {
      auto m = model::build_model(cfg.model, DType::F32);
      model::load_model_weights(cfg.eval.weights, m->params());
    } catch (const Error& e) {
      return fmt::format("run '{}': eval.weights: {}", r.id(), e.what());
    }
  }
  return "";
}

std::string fmt_num(double v, const char* f = "{:.4f}") {
  return std::isnan(v) ? std::string("-") : fmt::format(fmt::runtime(f), v);
}

}  // namespace

int run_sweeps(const CliOptions& o) {
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool world_root = world_rank == 0;

  // Every rank expands the sweeps (deterministic); errors are reported once, by rank 0.
  std::vector<config::RunSpec> runs;
  try {
    config::ExpandOptions eo;
    eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) {
      apply_model_preset(cfg, set_at);
      config::check_eval_config(cfg, set_at, {"the run config", 0});
    };
    runs = config::expand_sweep(o.sweep_files, o.overrides, eo);
  } catch (const Error& e) {
    if (world_root) std::fprintf(stderr, "amor-run: %s\n", e.what());
    return 2;
  }
  if (!o.only.empty()) {
    std::vector<config::RunSpec> kept;
    for (auto& r : runs)
      if (fnmatch(o.only.c_str(), r.id().c_str(), 0) == 0) kept.push_back(std::move(r));
    runs = std::move(kept);
    if (runs.empty()) {
      if (world_root) std::fprintf(stderr, "amor-run: --only '%s' matches no run\n", o.only.c_str());
      return 2;
    }
  }
  const fs::path output = o.output;

  // Every run's model shapes and sizes are checked before anything is created (dry run or not):
  // a width the heads do not divide, sizes that overflow or a run that cannot fit is a config
  // error (exit 2) naming the file, line and key, on every rank alike (deterministic).
  std::vector<int64_t> params(runs.size(), 0);
  try {
    for (size_t i = 0; i < runs.size(); ++i) {
      check_model_shapes(runs[i]);
      params[i] = model::count_parameters(runs[i].config.model);
    }
  } catch (const Error& e) {
    if (world_root) std::fprintf(stderr, "amor-run: %s\n", e.what());
    return 2;
  }

  if (o.dry_run) {
    if (world_root) {
      std::printf("%-44s %10s %10s  %-40s %s\n", "run", "params", "mem/rank", "overrides", "folder");
      for (size_t i = 0; i < runs.size(); ++i) {
        const auto& r = runs[i];
        std::string ov;
        for (const auto& [k, v] : r.overrides) ov += (ov.empty() ? "" : " ") + k + "=" + v;
        std::printf("%-44s %10s %10s  %-40s %s\n", r.id().c_str(),
                    fmt::format("{:.2f}M", static_cast<double>(params[i]) / 1e6).c_str(),
                    fmt::format("{:.2f}GiB", estimate_bytes_per_rank(r.config, params[i]) /
                                                 (1024.0 * 1024 * 1024)).c_str(),
                    ov.c_str(), r.dir(output).string().c_str());
      }
      std::printf("%zu runs\n", runs.size());
    }
    return 0;
  }

  // One group size for the whole invocation: it decides how the world is split.
  const int64_t per_run = runs.front().config.parallel.ranks_per_run;
  for (const auto& r : runs)
    if (r.config.parallel.ranks_per_run != per_run) {
      if (world_root)
        std::fprintf(stderr, "amor-run: parallel.ranks_per_run differs between runs (%lld and %lld); "
                     "launch them separately\n", static_cast<long long>(per_run),
                     static_cast<long long>(r.config.parallel.ranks_per_run));
      return 2;
    }
  if (per_run < 1 || world_size % per_run != 0) {
    if (world_root)
      std::fprintf(stderr, "amor-run: %d MPI ranks cannot be split into groups of parallel.ranks_per_run = %lld\n",
                   world_size, static_cast<long long>(per_run));
    return 2;
  }
  {
    std::string bad = world_root ? check_eval_weights(runs, output) : "";
    int n = static_cast<int>(bad.size());
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (n > 0) {
      if (world_root) std::fprintf(stderr, "amor-run: %s\n", bad.c_str());
      return 2;
    }
  }
  const int groups = world_size / static_cast<int>(per_run);
  const int group = world_rank / static_cast<int>(per_run);
  MPI_Comm group_comm;
  MPI_Comm_split(MPI_COMM_WORLD, group, world_rank, &group_comm);
  int status_code = 0;
  {
    dist::MpiCommunicator comm(group_comm);
    // The built-in corpus is prepared once, by world rank 0, before any run reads it.
    if (world_root) {
      try {
        for (const auto& r : runs)
          if (r.config.data.source == "corpus" && r.config.data.path.empty())
            builtin_corpus_dir(r.config.data.tokenizer);
      } catch (const Error& e) {
        std::fprintf(stderr, "amor-run: %s\n", e.what());
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);

    std::vector<Outcome> outcomes(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      if (static_cast<int>(i % static_cast<size_t>(groups)) != group) continue;
      const auto& spec = runs[i];
      const fs::path dir = spec.dir(output);
      Outcome& out = outcomes[i];
      const bool root = comm.rank() == 0;
      if (fs::exists(dir / "DONE")) {
        out.status = 2;
        if (root && !o.quiet) std::printf("%s: already DONE, skipped\n", spec.id().c_str());
        continue;
      }
      try {
        std::string why;
        std::optional<RunLock> lock;  // the group's rank 0 holds the folder while the run goes
        if (root) {
          try {
            check_run_folder(spec, output);
            fs::create_directories(dir);
            lock.emplace(dir);
            check_run_file(spec, dir);
            if (!fs::exists(dir / "config.json")) {
              write_file_atomic((dir / "config.json").string(), spec.canonical + "\n");
              write_file_atomic((dir / "config.yaml").string(), config::canonical_yaml(spec.config));
            }
          } catch (const std::exception& e) {
            why = e.what();
          }
        }
        why = comm.broadcast_string(why, 0);
        if (!why.empty()) throw Error(why);
        TrainerOptions to;
        to.run_dir = dir;
        to.quiet = o.quiet;
        // Several groups print at once: a live bar would interleave, so plain lines then.
        // mpirun hands ranks a pseudo-terminal, so isatty alone cannot tell; AMOR_PROGRESS=plain
        // forces plain lines.
        const char* mode = std::getenv("AMOR_PROGRESS");
        to.live = groups == 1 && ::isatty(::fileno(stdout)) && !(mode && std::string(mode) == "plain");
        RunResult res = train_run(spec, comm, to);
        out.final_loss = metric(res.metrics, "final_loss");
        out.valid_loss = metric(res.metrics, "valid_loss");
        out.mqar_acc = metric(res.metrics, "mqar_acc");
        out.fire_rate = metric(res.metrics, "fire_rate");
        for (const auto& c : eval_columns(spec.config)) out.evals.push_back(metric(res.metrics, c.c_str()));
        out.message = res.message;
        if (res.status == TrainStatus::Done) {
          out.status = 1;
          if (root) write_file_atomic((dir / "DONE").string(), utc_timestamp() + "\n");
        } else {
          out.status = res.status == TrainStatus::Stopped ? 3 : 4;
          if (res.status == TrainStatus::Failed && root)
            std::fprintf(stderr, "amor-run: run %s failed: %s\n", spec.id().c_str(), res.message.c_str());
        }
      } catch (const std::exception& e) {
        if (!dist::comm_failure().empty()) abort_job_on_comm_failure(spec, world_rank, e.what());
        out.status = 4;
        out.message = e.what();
        if (root) std::fprintf(stderr, "amor-run: run %s failed: %s\n", spec.id().c_str(), e.what());
      }
      if (out.status == 3) break;  // stop requested: this group takes no further runs
    }

    // Collect outcomes at world rank 0: each group's rank 0 knows its runs.
    for (size_t i = 0; i < runs.size(); ++i) {
      const int owner = static_cast<int>(i % static_cast<size_t>(groups)) * static_cast<int>(per_run);
      const size_t ncol = eval_columns(runs[i].config).size();
      outcomes[i].evals.resize(ncol, NAN);
      std::vector<double> vals = {static_cast<double>(outcomes[i].status), outcomes[i].final_loss,
                                  outcomes[i].valid_loss, outcomes[i].mqar_acc, outcomes[i].fire_rate};
      vals.insert(vals.end(), outcomes[i].evals.begin(), outcomes[i].evals.end());
      const int n = static_cast<int>(vals.size());
      if (owner != 0) {
        if (world_rank == owner) MPI_Send(vals.data(), n, MPI_DOUBLE, 0, 1000 + static_cast<int>(i), MPI_COMM_WORLD);
        if (world_root) {
          MPI_Recv(vals.data(), n, MPI_DOUBLE, owner, 1000 + static_cast<int>(i), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          outcomes[i] = {static_cast<int>(vals[0]), vals[1], vals[2], vals[3], vals[4], "",
                         std::vector<double>(vals.begin() + 5, vals.end())};
        }
      }
    }
    if (world_root) {
      std::map<std::string, std::vector<SweepIndexRow>> index;
      // Evaluation columns: every task any run evaluated (first-seen order), headed by the task.
      std::vector<std::string> cols;
      for (const auto& r : runs)
        for (const auto& c : eval_columns(r.config))
          if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
      auto task_of = [&](const std::string& col) {
        for (const auto& r : runs)
          for (const auto& t : eval::harness_tasks(r.config))
            if (col == t + "_" + eval::headline_metric(t)) return t;
        return col;
      };
      std::string head = fmt::format("\n{:<44} {:<8} {:>10} {:>10} {:>8} {:>8}", "run", "status", "loss",
                                     "valid", "recall", "fire");
      for (const auto& c : cols) head += fmt::format(" {:>{}}", task_of(c), std::max<size_t>(8, task_of(c).size()));
      std::printf("%s\n", head.c_str());
      for (size_t i = 0; i < runs.size(); ++i) {
        const auto& r = runs[i];
        const Outcome& oc = outcomes[i];
        static const char* names[] = {"pending", "done", "done", "stopped", "failed"};
        std::string line = fmt::format("{:<44} {:<8} {:>10} {:>10} {:>8} {:>8}", r.id(), names[oc.status],
                                       fmt_num(oc.final_loss), fmt_num(oc.valid_loss),
                                       fmt_num(oc.mqar_acc, "{:.3f}"), fmt_num(oc.fire_rate, "{:.3f}"));
        const auto own = eval_columns(r.config);
        for (const auto& c : cols) {
          auto it = std::find(own.begin(), own.end(), c);
          const double v = it == own.end() ? NAN : oc.evals.at(static_cast<size_t>(it - own.begin()));
          line += fmt::format(" {:>{}}", it == own.end() ? std::string("") : fmt_num(v, "{:.3f}"),
                              std::max<size_t>(8, task_of(c).size()));
        }
        std::printf("%s\n", line.c_str());
        SweepIndexRow row;
        row.run = r.name;
        row.hash = r.hash8;
        row.status = oc.status == 1 || oc.status == 2 ? RunStatus::Done
                     : oc.status == 4                 ? RunStatus::Failed
                                                      : RunStatus::Pending;
        row.keys = r.overrides;
        for (auto [k, v] : {std::pair<const char*, double>{"final_loss", oc.final_loss},
                            {"valid_loss", oc.valid_loss}, {"mqar_acc", oc.mqar_acc},
                            {"fire_rate", oc.fire_rate}})
          if (!std::isnan(v)) row.metrics.emplace_back(k, v);
        for (size_t c = 0; c < own.size(); ++c)
          if (!std::isnan(oc.evals.at(c))) row.metrics.emplace_back(own[c], oc.evals[c]);
        row.error = oc.message;
        index[r.sweep].push_back(row);
        if (oc.status == 4) status_code = std::max(status_code, 1);
        if (oc.status == 3 && status_code == 0) status_code = kRequeueExitCode;
      }
      for (auto& [sweep, rows] : index) write_sweep_index((output / sweep).string(), rows);
    }
  }
  MPI_Comm_free(&group_comm);
  MPI_Bcast(&status_code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status_code;
}

}  // namespace amor
