// Which GPU a rank computes on: ranks of one host take its GPUs in turn (local rank modulo the
// number of devices), the layout mpirun and srun give with one rank per GPU.
#pragma once
#include <mpi.h>

namespace amor::dist {

// Collective over comm. Selects the rank's device (cudaSetDevice) and returns its index; throws
// amor::Error naming the host when it has no CUDA device, or when a build without CUDA is asked.
int select_cuda_device(MPI_Comm comm);

}  // namespace amor::dist
