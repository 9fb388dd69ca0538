// The run group's collectives that a model asks for (models/lm/run_contract.h), over a
// Communicator: Fsdp plugs one into the model it shards, the trainer reduces the model's metrics
// through one. gather_flat puts rank r's elements at [offset_r, offset_r + n_r) of the result,
// ranks in order, so when each rank holds its slice of the global micro-batch (data/loader/
// rank_split.h) the gathered vector is the one-rank run's, element for element (what AMOR's gate
// statistics need, design §3). Ranks may hold different counts (a ragged last batch): the counts
// travel first.
#pragma once
#include "models/lm/run_contract.h"
#include "runner/dist/communicator.h"

namespace amor::dist {

// Collective. Takes f32 or f64 on any device and returns every rank's elements, flat, in the same
// dtype on the same device. They travel on comm.device(): with NCCL and cuda tensors they never
// leave the GPU (only the W counts go through the host); with MPI they go through the host. With
// one rank it returns local's elements as they are.
Tensor gather_flat(Communicator& comm, const Tensor& local);

class CommRunGroup final : public model::RunGroup {
 public:
  explicit CommRunGroup(Communicator& comm) : comm_(comm) {}
  int size() const override { return comm_.size(); }
  Tensor gather_flat(const Tensor& local) override { return dist::gather_flat(comm_, local); }
  void sum(std::vector<double>& values) override;

 private:
  Communicator& comm_;
};

}  // namespace amor::dist
