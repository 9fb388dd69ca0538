#include "runner/app/cli.h"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "kernels/core/error.h"
#include "runner/app/version.h"
#include "runner/config/key_table.h"

namespace amor {

namespace po = boost::program_options;

namespace {
po::options_description visible_options() {
  po::options_description d("Options");
  d.add_options()
      ("help,h", "show this help and exit")
      ("version", "print the version and the git commit it was built from")
      ("print-config-keys", "print every run-config key (type or values, default, doc) as the Markdown table of runner/config/README.md and exit")
      ("dry-run", "print the expanded runs (name, hash, parameters, a rough memory estimate per rank, an estimate of H200 GPU-hours, overrides, folder) and the sweep's total, and exit")
      ("shard", po::value<std::string>(), "i/n: run only this job's share of the runs (run k of the expanded runs belongs to shard k mod n), for n jobs sharing one sweep (a job array); 'slurm': i and n from the Slurm job array (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT)")
      ("threads", po::value<std::string>()->default_value("auto"), "BLAS (OpenBLAS/OpenMP) threads per rank, recorded in run.h5: N, or auto = OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this rank may use divided by the ranks on its node (at least 1)")
      ("only", po::value<std::string>(), "run only runs whose id (name-hash) matches this glob")
      ("output", po::value<std::string>()->default_value("results"), "results folder")
      ("quiet,q", "no progress lines");
  return d;
}
}  // namespace

std::string usage() {
  std::ostringstream s;
  s << "usage: mpirun -np P amor-run [options] SWEEP.yaml... [key=value...]\n\n"
       "Trains and evaluates every run of the sweeps, ranks_per_run ranks per run, and writes\n"
       "results/<sweep>/<run>-<hash>/run.h5. key=value overrides (dotted keys, e.g.\n"
       "train.steps=100) apply to every run; each key once.\n\n"
    << visible_options()
    << "\nExit status: 0 all runs done; 1 a run failed (and none was stopped); 2 bad command line or\n"
       "config; 75 a run was stopped by SIGTERM or checkpoint.signal after checkpointing, whatever\n"
       "the other runs did (run again to resume: DONE runs are skipped, failed ones run again).\n"
       "\n       amor-run convert-weights --from authors | --to authors ...  (the AMOR authors'\n"
       "       checkpoints to and from amor-run weights; amor-run convert-weights --help)\n"
       "       amor-run fit-router RUN_DIR ...  (fits an AMOR run's entropy router;\n"
       "       amor-run fit-router --help)\n"
       "       amor-run bench-decode SWEEP.yaml ...  (prefill and decode speed of the sweep's models;\n"
       "       amor-run bench-decode --help)\n";
  return s.str();
}

CliParse parse_cli(int argc, const char* const* argv, bool print) {
  CliParse out;
  po::options_description all = visible_options();
  all.add_options()("args", po::value<std::vector<std::string>>()->multitoken(), "");
  po::positional_options_description pos;
  pos.add("args", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    if (print) std::fprintf(stderr, "amor-run: %s\n\n%s", e.what(), usage().c_str());
    out.exit_code = 2;
    return out;
  }
  if (vm.count("help")) {
    if (print) std::printf("%s", usage().c_str());
    return out;
  }
  if (vm.count("version")) {
    if (print) std::printf("amor-run %s (commit %s)\n", version().c_str(), git_commit().c_str());
    return out;
  }
  if (vm.count("print-config-keys")) {
    if (print) std::printf("%s", config::key_table_markdown().c_str());
    return out;
  }
  CliOptions o;
  if (vm.count("args"))
    for (const auto& a : vm["args"].as<std::vector<std::string>>())
      (a.find('=') != std::string::npos ? o.overrides : o.sweep_files).push_back(a);
  o.dry_run = vm.count("dry-run") > 0;
  o.quiet = vm.count("quiet") > 0;
  if (vm.count("only")) o.only = vm["only"].as<std::string>();
  o.output = vm["output"].as<std::string>();
  try {
    if (vm.count("shard")) o.shard = parse_shard(vm["shard"].as<std::string>(), process_env);
    const std::string t = vm["threads"].as<std::string>();
    if (t != "auto") {
      const bool digits = !t.empty() && t.size() <= 4 && t.find_first_not_of("0123456789") == std::string::npos;
      o.threads = digits ? std::stoi(t) : 0;
      if (o.threads < 1 || o.threads > 1024)
        throw Error("--threads '" + t + "': expected a whole number of threads per rank in [1, 1024], or auto");
    }
  } catch (const Error& e) {
    if (print) std::fprintf(stderr, "amor-run: %s\n", e.what());
    out.exit_code = 2;
    return out;
  }
  if (o.sweep_files.empty()) {
    if (print) std::fprintf(stderr, "amor-run: no sweep file given\n\n%s", usage().c_str());
    out.exit_code = 2;
    return out;
  }
  out.options = o;
  return out;
}

}  // namespace amor
