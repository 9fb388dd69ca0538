// amor-run: mpirun -np P amor-run [options] SWEEP.yaml... [key=value...]  (see runner/app/cli.cpp)
//          amor-run convert-weights ...  (runner/app/convert_weights.h)
//          amor-run fit-router RUN_DIR ...  (runner/app/fit_router.h)
//          amor-run bench-decode SWEEP.yaml ...  (runner/app/bench_decode.h)
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "runner/app/bench_decode.h"
#include "runner/app/cli.h"
#include "runner/app/convert_weights.h"
#include "runner/app/fit_router.h"
#include "runner/app/sweep_runner.h"

int main(int argc, char** argv) {
  // A file conversion, no run: it needs no MPI (runner/app/convert_weights.h).
  if (amor::is_convert_weights(argc, argv))
    return amor::convert_weights_main(std::vector<std::string>(argv + 2, argv + argc), std::cout, std::cerr);
  if (amor::is_fit_router(argc, argv))  // one process, no MPI either
    return amor::fit_router_main(std::vector<std::string>(argv + 2, argv + argc), std::cout, std::cerr);
  if (amor::is_bench_decode(argc, argv))  // one process, one device
    return amor::bench_decode_main(std::vector<std::string>(argv + 2, argv + argc), std::cout, std::cerr);
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
