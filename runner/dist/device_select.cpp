#include "runner/dist/device_select.h"

#include <unistd.h>

#include <string>

#include "kernels/core/error.h"

#ifdef AMOR_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace amor::dist {

int select_cuda_device(MPI_Comm comm) {
  // The ranks sharing this host, in rank order.
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
#ifdef AMOR_HAVE_CUDA
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  AMOR_CHECK(rc == cudaSuccess && devices > 0,
             "device: cuda, but host {} has no usable CUDA device ({}); run with device: cpu", host,
             rc == cudaSuccess ? "0 devices" : cudaGetErrorString(rc));
  const int device = local_rank % devices;
  AMOR_CHECK(cudaSetDevice(device) == cudaSuccess, "cannot select cuda device {} on host {}", device, host);
  (void)local_size;  // more ranks than GPUs share them (correct, slower; NCCL refuses two ranks on one GPU)
  return device;
#else
  (void)local_rank;
  (void)local_size;
  throw Error(fmt::format("device: cuda, but this amor-run was built without CUDA (host {}); "
                          "rebuild where nvcc exists, or run with device: cpu", host));
#endif
}

}  // namespace amor::dist
