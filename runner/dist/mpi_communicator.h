// The Communicator over MPI (CPU tensors): how the sharding runs in CI under mpirun.
//
// It works on its own duplicate of the communicator it is given (a run group's MPI_Comm_split of
// the world, or the world), with MPI_ERRORS_RETURN set, so its collectives never match the
// caller's and an MPI failure comes back as an error code rather than killing the process. Every
// operation is a non-blocking MPI collective (MPI_Iallgather, MPI_Ireduce_scatter_block, ...)
// completed by polling MPI_Test under a watchdog: past the timeout (comm_timeout_seconds()) the
// call throws amor::Error naming the operation, this rank and the timeout. Polling yields the CPU
// between tests (and sleeps 100 us once a wait is long), since ranks are often oversubscribed.
//
// Open MPI progresses non-blocking collectives only inside MPI calls (there is no progress
// thread), so an all_gather_start mostly moves its data when it is waited on: the prefetch
// structure pays off with NCCL's side stream, not here.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "runner/dist/communicator.h"

namespace amor::dist {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over comm. timeout_s <= 0 takes comm_timeout_seconds().
  explicit MpiCommunicator(MPI_Comm comm, double timeout_s = 0);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "mpi"; }
  double timeout_seconds() const { return timeout_s_; }
  // The communicator's own MPI handle (e.g. to bootstrap an NCCL communicator over the same ranks).
  MPI_Comm handle() const { return comm_; }
  // The first failure's message once an operation failed or timed out; "" while healthy.
  const std::string& broken() const { return broken_; }

  void all_gather(const Tensor& shard, Tensor& full) override;
  std::unique_ptr<PendingCollective> all_gather_start(const Tensor& shard, Tensor& full) override;
  void reduce_scatter(const Tensor& full, Tensor& shard) override;
  void all_reduce(Tensor& t, ReduceOp op) override;
  void all_reduce(double* values, int64_t n, ReduceOp op) override;
  void all_reduce(int64_t* values, int64_t n, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void broadcast(void* host_bytes, size_t n, int root) override;
  void barrier() override;

 private:
  friend class MpiPending;
  void check_healthy(const char* op) const;
  // Polls req to completion under the watchdog. keep: the buffers req writes, parked for the life
  // of the communicator if it fails (MPI may still write into them).
  void wait(MPI_Request& req, const char* op, std::vector<Tensor> keep);
  [[noreturn]] void fail(const char* op, const std::string& why, std::vector<Tensor> keep);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 300;
  std::string broken_;
  std::vector<Tensor> abandoned_;
};

}  // namespace amor::dist
