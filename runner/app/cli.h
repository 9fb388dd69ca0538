// amor-run's command line (Boost.Program_options):
//   amor-run [options] SWEEP.yaml... [key=value...]
// Positional arguments with '=' are overrides applied to every run; the others are sweep files.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runner/app/shard.h"

namespace amor {

struct CliOptions {
  std::vector<std::string> sweep_files;
  std::vector<std::string> overrides;  // "key=value"
  bool dry_run = false;
  std::string only;                    // glob over run ids ("" = all)
  std::string output = "results";
  bool quiet = false;
  std::optional<Shard> shard;  // --shard i/n | slurm: this job's share of the runs (runner/app/shard.h)
  int threads = 0;             // --threads: BLAS threads per rank; 0 = auto (runner/app/threads.h)
};

// Returns the options, or an exit code when the command line was handled (help, version: 0) or
// is wrong (2, with the message on stderr).
struct CliParse {
  std::optional<CliOptions> options;
  int exit_code = 0;
};
CliParse parse_cli(int argc, const char* const* argv, bool print);

std::string usage();

}  // namespace amor
