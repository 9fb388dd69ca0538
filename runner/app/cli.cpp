#include "runner/app/cli.h"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

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
      ("dry-run", "print the expanded runs (name, hash, parameters, a rough memory estimate per rank, overrides, folder) and exit")
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
       "train.steps=100) apply to every run.\n\n"
    << visible_options()
    << "\nExit status: 0 all runs done; 1 a run failed; 2 bad command line or config;\n"
       "75 stopped by SIGTERM or checkpoint.signal after checkpointing (run again to resume).\n";
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
  if (o.sweep_files.empty()) {
    if (print) std::fprintf(stderr, "amor-run: no sweep file given\n\n%s", usage().c_str());
    out.exit_code = 2;
    return out;
  }
  out.options = o;
  return out;
}

}  // namespace amor
