// The collectives a sharded run needs (design §4), behind one interface with an MPI implementation
// (CPU tensors, mpi_communicator.h) and an NCCL one (CUDA tensors, nccl_communicator.h), so the
// same FSDP code runs in CI under `mpirun -np 2/4` and on GPUs.
//
// Every call is collective over the communicator's ranks: all ranks call the same operations in
// the same order with the same sizes. Every call either completes or throws amor::Error within
// the communicator's timeout (AMOR_COMM_TIMEOUT_S, comm_timeout_seconds()): a peer that died or
// hangs ends the run with a message naming the operation and this rank instead of a hang. After
// such an error the communicator is broken (later calls throw at once): the process should report
// and abort (MPI_Abort), since the collective it gave up on can never be completed or cancelled.
//
// Shapes: all_gather takes equal shards of n elements and fills a full tensor of W*n (rank r's
// shard at [r*n, (r+1)*n)); reduce_scatter is its adjoint: a full tensor of W*n in, the sum over
// ranks of block r out on rank r. Tensors are contiguous, on the implementation's device; gathers
// and broadcasts move any dtype, reductions take f32 or f64 tensors. The raw double/int64 buffers
// (host memory, for scalars such as norms, token counts and flags) are reduced in rank order on
// every rank, so every rank gets the bitwise same value and a rerun at the same W does too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/core/tensor.h"

namespace amor::dist {

enum class ReduceOp { Sum, Max };

// A collective in flight (all_gather_start); wait() completes it under the watchdog, or throws.
// Destroying one that was never waited waits for it first (the buffers it writes must outlive it).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;  // where its tensors live
  virtual std::string name() const = 0;  // "mpi" or "nccl", for messages and reports

  // full[r*n:(r+1)*n] = shard of rank r, n = shard.numel(); full.numel() must be W*n.
  virtual void all_gather(const Tensor& shard, Tensor& full) = 0;
  // Starts the same all-gather and returns at once (FSDP's prefetch); shard and full must stay
  // alive and unchanged until wait() returns.
  virtual std::unique_ptr<PendingCollective> all_gather_start(const Tensor& shard, Tensor& full) = 0;
  // shard = sum over ranks of their full[r*n:(r+1)*n], n = shard.numel(); f32/f64.
  virtual void reduce_scatter(const Tensor& full, Tensor& shard) = 0;
  // In place, sum or max over ranks; f32/f64.
  virtual void all_reduce(Tensor& t, ReduceOp op) = 0;
  // Host buffers of n values, in place, folded in rank order (bitwise the same on every rank).
  virtual void all_reduce(double* values, int64_t n, ReduceOp op) = 0;
  virtual void all_reduce(int64_t* values, int64_t n, ReduceOp op) = 0;
  // root's t (or bytes) copied to every rank.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void broadcast(void* host_bytes, size_t n, int root) = 0;
  virtual void barrier() = 0;

  // Convenience over the raw forms.
  double all_reduce_sum(double v);
  int64_t all_reduce_sum(int64_t v);
  int64_t all_reduce_max(int64_t v);
  // root's string on every rank (the length travels first).
  std::string broadcast_string(const std::string& s, int root);
};

// The watchdog's limit in seconds: AMOR_COMM_TIMEOUT_S when set (a positive number; anything else
// is an error naming the variable), else 300. Long enough for a slow first step of a large model,
// short enough that a dead peer does not hold a cluster allocation for long; tests set it small.
double comm_timeout_seconds();

// The first communicator failure (timeout, MPI or NCCL error) in this process, "" while none.
// Every transport records it when it breaks. A process that gave up on a collective cannot end
// MPI cleanly (MPI_Finalize, and any later world collective, waits on the peer that never came),
// so the runner ends the whole job with MPI_Abort once this is set (runner/app/sweep_runner.cpp).
void record_comm_failure(const std::string& message);
std::string comm_failure();

}  // namespace amor::dist
