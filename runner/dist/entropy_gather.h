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
// and keeps a reference to comm. It takes and returns flat cpu tensors of f32 or f64.
model::EntropyGather make_entropy_gather(Communicator& comm);

}  // namespace amor::dist
