// AMOR's threshold statistics over the micro-batch of all the run's ranks (design §3): the
// EntropyGather hook (models/amor/amor_gate.h) over a Communicator. Rank r's entropies come at
// [offset_r, offset_r + n_r) of the result, ranks in order, so when each rank holds its slice of
// the global micro-batch (rank_batch.h) the gathered vector is the one-rank run's, element for
// element. Ranks may hold different counts (a ragged last batch): the counts travel first.
#pragma once
#include "models/amor/amor_gate.h"
#include "runner/dist/communicator.h"

namespace amor::dist {

// The returned function is collective (every rank calls it once per block per training forward)
// and keeps a reference to comm. It takes entropies of f32 or f64 on any device and returns the
// run's, flat, in the same dtype on the same device. The entropies travel on comm.device(): with
// NCCL and cuda entropies they never leave the GPU (only the W counts go through the host); with
// MPI they go through the host. With one rank it returns local's elements as they are.
model::EntropyGather make_entropy_gather(Communicator& comm);

}  // namespace amor::dist
