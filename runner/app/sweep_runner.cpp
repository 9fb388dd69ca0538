// run_sweeps in steps: expand the sweeps, check every run before anything is created (shapes,
// eval.weights), list them (--dry-run) or split the world into run groups, train each group's
// runs, then bring the outcomes to world rank 0 and report them (sweep_outcomes.h).
#include "runner/app/sweep_runner.h"

#include <fnmatch.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "models/core/config_json.h"
#include "models/io/model_weights.h"
#include "models/lm/language_model.h"
#include "models/presets/param_count.h"
#include "models/io/safetensors.h"
#include "runner/app/gpu_hours.h"
#include "runner/app/preset_resolve.h"
#include "runner/app/run_folder.h"
#include "runner/app/sweep_outcomes.h"
#include "runner/app/threads.h"
#include "runner/config/eval_checks.h"
#include "runner/config/sweep.h"
#include "runner/dist/mpi_communicator.h"
#include "runner/output/run_file.h"
#include "runner/train/data_setup.h"
#include "runner/train/progress.h"
#include "runner/train/trainer.h"

namespace amor {

namespace fs = std::filesystem;

namespace {

// The runs of the sweep files, filtered by --only; an exit status (2) if there are none or a file
// is bad (errors printed once, by world rank 0). Every rank expands them alike (deterministic).
// The evaluation keys are checked on the runs --only keeps: an override that only some kinds take
// (eval.router=... beside --only '*amor*') is then not refused for runs that will not run.
std::optional<std::vector<config::RunSpec>> expand_runs(const CliOptions& o, bool world_root, int& status) {
  std::vector<config::RunSpec> runs;
  try {
    config::ExpandOptions eo;
    eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) { apply_model_preset(cfg, set_at); };
    runs = config::expand_sweep(o.sweep_files, o.overrides, eo);
  } catch (const Error& e) {
    if (world_root) std::fprintf(stderr, "amor-run: %s\n", e.what());
    status = 2;
    return std::nullopt;
  }
  if (!o.only.empty()) {
    std::vector<config::RunSpec> kept;
    for (auto& r : runs)
      if (fnmatch(o.only.c_str(), r.id().c_str(), 0) == 0) kept.push_back(std::move(r));
    runs = std::move(kept);
    if (runs.empty()) {
      if (world_root) std::fprintf(stderr, "amor-run: --only '%s' matches no run\n", o.only.c_str());
      status = 2;
      return std::nullopt;
    }
  }
  try {
    for (const config::RunSpec& r : runs) config::check_eval_config(r.config, r.set_at, {r.sweep_file, 0});
  } catch (const Error& e) {
    if (world_root) std::fprintf(stderr, "amor-run: %s\n", e.what());
    status = 2;
    return std::nullopt;
  }
  return runs;
}

// Every run's model shapes and sizes are checked before anything is created (dry run or not):
// a width the heads do not divide, sizes that overflow or a run that cannot fit is a config
// error (exit 2) naming the file, line and key, on every rank alike (deterministic). Returns the
// parameter counts, or nullopt after printing the error.
std::optional<std::vector<int64_t>> check_shapes(const std::vector<config::RunSpec>& runs, bool world_root) {
  std::vector<int64_t> params(runs.size(), 0);
  try {
    for (size_t i = 0; i < runs.size(); ++i) {
      check_model_shapes(runs[i]);
      params[i] = model::count_parameters(runs[i].config.model);
    }
  } catch (const Error& e) {
    if (world_root) std::fprintf(stderr, "amor-run: %s\n", e.what());
    return std::nullopt;
  }
  return params;
}

// Per run: name-hash, parameters, memory per rank, H200 GPU-hours (an estimate: gpu_hours.h),
// overrides, folder; then the total over the listed runs.
void print_dry_run(const std::vector<config::RunSpec>& runs, const std::vector<int64_t>& params,
                   const fs::path& output) {
  std::printf("%-44s %10s %10s %10s  %-40s %s\n", "run", "params", "mem/rank", "GPU-h", "overrides", "folder");
  double total = 0;
  size_t without = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::string ov;
    for (const auto& [k, v] : r.overrides) ov += (ov.empty() ? "" : " ") + k + "=" + v;
    const std::optional<double> hours = estimate_gpu_hours(r.config, params[i]);
    if (hours) total += *hours;
    else ++without;
    std::printf("%-44s %10s %10s %10s  %-40s %s\n", r.id().c_str(),
                fmt::format("{:.2f}M", static_cast<double>(params[i]) / 1e6).c_str(),
                fmt::format("{:.2f}GiB", estimate_bytes_per_rank(r.config, params[i]) /
                                             (1024.0 * 1024 * 1024)).c_str(),
                hours ? fmt::format("{:.3g}", *hours).c_str() : "-", ov.c_str(), r.dir(output).string().c_str());
  }
  std::printf("total: %s GPU-hours (estimate: training tokens over tokens/s measured on one H200 per model "
              "kind, tests/cuda/RESULTS.md, interpolated by parameter count%s)\n",
              fmt::format("{:.3g}", total).c_str(),
              without ? fmt::format("; {} run{} of a kind without measurements not counted", without,
                                    without == 1 ? "" : "s").c_str()
                      : "");
  std::printf("%zu runs\n", runs.size());
}

// One group size for the whole invocation (it decides how the world is split); 0 and an error
// printed if the runs disagree or the world does not split.
int64_t ranks_per_run(const std::vector<config::RunSpec>& runs, int world_size, bool world_root) {
  const int64_t per_run = runs.front().config.parallel.ranks_per_run;
  for (const auto& r : runs)
    if (r.config.parallel.ranks_per_run != per_run) {
      if (world_root)
        std::fprintf(stderr, "amor-run: parallel.ranks_per_run differs between runs (%lld and %lld); "
                     "launch them separately\n", static_cast<long long>(per_run),
                     static_cast<long long>(r.config.parallel.ranks_per_run));
      return 0;
    }
  if (per_run < 1 || world_size % per_run != 0) {
    if (world_root)
      std::fprintf(stderr, "amor-run: %d MPI ranks cannot be split into groups of parallel.ranks_per_run = %lld\n",
                   world_size, static_cast<long long>(per_run));
    return 0;
  }
  return per_run;
}

// Every eval.weights and eval.router file of the runs still to do is read (names and shapes against
// the run's model) by world rank 0 before anything is created, also under --dry-run, so a path
// that does not exist or a file that does not fit is refused like a bad config (exit 2) and leaves
// no folder, config or index.csv behind. Each (file, model) pair is read once; the runs read their
// files again when they start. Returns the first problem, "" when all load.
std::string check_eval_files(const std::vector<config::RunSpec>& runs, const fs::path& output) {
  std::set<std::string> checked;
  for (const auto& r : runs) {
    const config::RunConfig& cfg = r.config;
    if ((cfg.eval.weights.empty() && cfg.eval.router.empty()) || fs::exists(r.dir(output) / "DONE"))
      continue;
    const std::string model = model::to_json(cfg.model).dump();
    const bool weights = !cfg.eval.weights.empty() && checked.insert(cfg.eval.weights + "\n" + model).second;
    const bool router = !cfg.eval.router.empty() && checked.insert(cfg.eval.router + "\n" + model).second;
    if (!weights && !router) continue;
    auto m = model::build_model(cfg.model, DType::F32);
    try {
      if (weights) model::load_model_weights(cfg.eval.weights, m->params());
    } catch (const Error& e) {
      return fmt::format("run '{}': eval.weights: {}", r.id(), e.what());
    }
    try {
      if (router) m->use_entropy_router(cfg.eval.router);
    } catch (const Error& e) {
      return fmt::format("run '{}': eval.router: {}", r.id(), e.what());
    }
  }
  return "";
}

// After a communicator failure (a peer rank hung or died mid-collective) this process holds a
// collective that can never complete: the group's next collective, the outcome exchange and
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

// One run on this group: skipped if DONE; else its folder prepared by the group's rank 0 (any
// problem reaches every rank), trained, and marked DONE. Failures are recorded, not thrown.
Outcome run_one(const config::RunSpec& spec, dist::MpiCommunicator& comm, const CliOptions& o, bool live,
                int threads, int world_rank) {
  const fs::path dir = spec.dir(o.output);
  const bool root = comm.rank() == 0;
  Outcome out;
  if (fs::exists(dir / "DONE")) {
    out.status = 2;
    if (root && !o.quiet) std::printf("%s: already DONE, skipped\n", spec.id().c_str());
    return out;
  }
  try {
    std::string why;
    std::optional<RunLock> lock;  // the group's rank 0 holds the folder while the run goes
    if (root) {
      try {
        prepare_run_folder(spec, o.output, lock);
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    why = comm.broadcast_string(why, 0);
    if (!why.empty()) throw Error(why);
    TrainerOptions to;
    to.run_dir = dir;
    to.quiet = o.quiet;
    to.live = live;
    to.threads = threads;
    const RunResult res = train_run(spec, comm, to);
    out = outcome_of(spec, res);
    if (res.status == TrainStatus::Done) {
      if (root) write_file_atomic((dir / "DONE").string(), utc_timestamp() + "\n");
    } else if (res.status == TrainStatus::Failed && root) {
      std::fprintf(stderr, "amor-run: run %s failed: %s\n", spec.id().c_str(), res.message.c_str());
    }
  } catch (const std::exception& e) {
    if (!dist::comm_failure().empty()) abort_job_on_comm_failure(spec, world_rank, e.what());
    out.status = 4;
    out.message = e.what();
    if (root) std::fprintf(stderr, "amor-run: run %s failed: %s\n", spec.id().c_str(), e.what());
  }
  return out;
}

}  // namespace

int run_sweeps(const CliOptions& o) {
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const bool world_root = world_rank == 0;

  int status = 0;
  const std::optional<std::vector<config::RunSpec>> expanded = expand_runs(o, world_root, status);
  if (!expanded) return status;
  const std::vector<config::RunSpec>& all_runs = *expanded;
  const fs::path output = o.output;
  // Every run is checked (every job of an array alike), then this job keeps its shard's.
  const std::optional<std::vector<int64_t>> all_params = check_shapes(all_runs, world_root);
  if (!all_params) return 2;
  std::vector<config::RunSpec> runs;
  std::vector<int64_t> params;
  for (size_t k = 0; k < all_runs.size(); ++k)
    if (!o.shard || o.shard->holds(k)) {
      runs.push_back(all_runs[k]);
      params.push_back((*all_params)[k]);
    }
  if (o.shard && world_root && !o.quiet)
    std::printf("amor-run: shard %s: %zu of the %zu runs (run k belongs to shard k mod %lld)\n",
                o.shard->str().c_str(), runs.size(), all_runs.size(), static_cast<long long>(o.shard->count));
  {
    std::string bad = world_root ? check_eval_files(runs, output) : "";
    int n = static_cast<int>(bad.size());
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (n > 0) {
      if (world_root) std::fprintf(stderr, "amor-run: %s\n", bad.c_str());
      return 2;
    }
  }

  if (o.dry_run) {
    if (world_root) print_dry_run(runs, params, output);
    return 0;
  }
  if (runs.empty()) {
    if (world_root && !o.quiet) std::printf("amor-run: shard %s holds no run; nothing to do\n", o.shard->str().c_str());
    return 0;
  }
  const int64_t per_run = ranks_per_run(runs, world_size, world_root);
  if (per_run == 0) return 2;
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

    // BLAS threads per rank, set before any GEMM and recorded in each run.h5 (threads.h).
    int threads = 0;
    {
      MPI_Comm node;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node);
      int on_node = 1;
      MPI_Comm_size(node, &on_node);
      MPI_Comm_free(&node);
      const ThreadChoice tc = choose_threads(o.threads, process_env, affinity_cpus(), on_node);
      threads = apply_threads(tc.threads);
      if (world_root && !o.quiet)
        std::printf("amor-run: %d BLAS thread%s per rank (%s)\n", threads, threads == 1 ? "" : "s", tc.why.c_str());
    }

    // The live bar only for one group on a terminal outside Slurm (progress.h: live_progress).
    ProgressContext pc;
    pc.groups = groups;
    pc.mode = process_env("AMOR_PROGRESS");
    pc.slurm_job = process_env("SLURM_JOB_ID").has_value();
    pc.stdout_terminal = stdout_reaches_terminal();
    const bool live = live_progress(pc);
    std::vector<Outcome> outcomes(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) {  // run i goes to group i mod groups
      if (static_cast<int>(i % static_cast<size_t>(groups)) != group) continue;
      outcomes[i] = run_one(runs[i], comm, o, live, threads, world_rank);
      if (outcomes[i].status == 3) break;  // stop requested: this group takes no further runs
    }
    collect_outcomes(runs, outcomes, groups, static_cast<int>(per_run), world_rank);
    if (world_root) status_code = report_outcomes(runs, outcomes, output, all_runs, o.shard);
  }
  MPI_Comm_free(&group_comm);
  MPI_Bcast(&status_code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status_code;
}

}  // namespace amor
