// amor-run: mpirun -np P amor-run [options] SWEEP.yaml... [key=value...]  (see runner/app/cli.cpp)
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "runner/app/cli.h"
#include "runner/app/sweep_runner.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  amor::CliParse cli = amor::parse_cli(argc, argv, /*print=*/rank == 0);
  if (!cli.options) {
    code = cli.exit_code;
  } else {
    try {
      code = amor::run_sweeps(*cli.options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "amor-run: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return code;
}
