// BLAS threads per rank (`--threads`), set explicitly in every rank before its first GEMM and
// recorded in run.h5 (root attribute `threads`), so that a resumed CPU run computes with the
// threads it started with under any launcher (OpenBLAS's sums, and so the losses, depend on them).
//
//   --threads N      N threads per rank.
//   --threads auto   (default) OPENBLAS_NUM_THREADS if set, else OMP_NUM_THREADS (the Slurm
//                    templates set both from --cpus-per-task), else the CPUs this rank may use
//                    (its affinity mask) divided by the ranks of the job on its node, at least 1.
//
// The count is applied with openblas_set_num_threads (and omp_set_num_threads where an OpenMP
// runtime is loaded: OpenBLAS's OpenMP build), looked up at run time so that another BLAS links
// too, and exported as OPENBLAS_NUM_THREADS / OMP_NUM_THREADS for anything started later.
#pragma once
#include <string>

#include "runner/app/shard.h"

namespace amor {

struct ThreadChoice {
  int threads = 1;
  std::string why;  // where the number came from, for the log line
};

// requested: --threads (0 = auto); cpus: CPUs this rank may run on; ranks_on_node: the job's ranks
// on this rank's node.
ThreadChoice choose_threads(int requested, const EnvLookup& env, int cpus, int ranks_on_node);

// Sets the count in the BLAS (and OpenMP) of this process; returns the count the BLAS reports
// back (capped by its build), or `threads` when no OpenBLAS is loaded.
int apply_threads(int threads);

// The CPUs this process may run on (sched_getaffinity), at least 1.
int affinity_cpus();

}  // namespace amor
