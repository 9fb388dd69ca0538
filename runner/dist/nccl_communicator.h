// The Communicator over NCCL (CUDA tensors, one GPU per rank), built only with CUDA
// (AMOR_HAVE_CUDA) and linked against libnccl.
//
// Set-up: rank 0's ncclUniqueId is broadcast over the MPI communicator the run group already has
// (under MpiCommunicator's watchdog), then every rank joins with ncclCommInitRankConfig in
// non-blocking mode (config.blocking = 0), polled to completion. Each collective is enqueued on
// the communicator's own stream after an event that orders it behind the work already on the
// legacy default stream (where every kernel of amor-run runs), then waited for by polling its
// completion event; while waiting, a watchdog polls ncclCommGetAsyncError and the clock. An NCCL
// error or the timeout (comm_timeout_seconds()) aborts the NCCL communicator (ncclCommAbort) and
// throws amor::Error naming the operation and the rank: a failed or stuck peer ends the run with a
// message instead of a hang. all_gather_start returns with the gather still on the side stream, so
// FSDP's prefetch overlaps the compute of the current unit.
//
// The caller picks the GPU first (cudaSetDevice(local rank)); the communicator uses the device
// that is current at construction. The host-buffer reductions and byte broadcasts stage through
// small device buffers.
#pragma once
#ifdef AMOR_HAVE_CUDA
#include <mpi.h>

#include <memory>
#include <string>

#include "runner/dist/communicator.h"

namespace amor::dist {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over bootstrap. timeout_s <= 0 takes comm_timeout_seconds().
  explicit NcclCommunicator(MPI_Comm bootstrap, double timeout_s = 0);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "nccl"; }
  int cuda_device() const;
  const std::string& broken() const;

  void all_gather(const Tensor& shard, Tensor& full) override;
  std::unique_ptr<PendingCollective> all_gather_start(const Tensor& shard, Tensor& full) override;
  void reduce_scatter(const Tensor& full, Tensor& shard) override;
  void all_reduce(Tensor& t, ReduceOp op) override;
  void all_reduce(double* values, int64_t n, ReduceOp op) override;
  void all_reduce(int64_t* values, int64_t n, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void broadcast(void* host_bytes, size_t n, int root) override;
  void barrier() override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace amor::dist
#endif  // AMOR_HAVE_CUDA
