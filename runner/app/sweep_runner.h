// What `amor-run` does after parsing its command line: expand the sweeps, split the MPI world into
// groups of parallel.ranks_per_run ranks, deal the runs to the groups (run i to group i mod G),
// train each run on its group (skipping DONE runs, resuming checkpointed ones, refusing runs whose
// folder holds another config), record failures without stopping the other runs, then write each
// sweep's index.csv and print a summary. Returns the process exit status (see cli.h usage()).
#pragma once
#include "runner/app/cli.h"

namespace amor {

int run_sweeps(const CliOptions& options);

}  // namespace amor
