// How W ranks split one global micro-batch so that together they compute what one rank computes
// on all of it (design §4: losses equal a one-rank run of the same global batch).
//
// Rank r takes sequences [r*b, (r+1)*b) of a global micro-batch of W*b sequences (the one rule of
// data/loader/rank_split.h, which every data source follows too). Everything per
// sequence then matches; the state drawn from the whole batch matches too:
//  - AMOR's gate statistics: Fsdp gives the model its run group (run_group.h), whose gather_flat
//    concatenates in this order;
//  - Oryx's training modes: drawn per sequence from its sample id (Batch::sample_ids), which the
//    slice keeps. A global batch without sample ids leaves each rank numbering its own sequences
//    from a local counter, which does not match one rank: give Oryx batches sample ids.
#pragma once
#include "models/lm/language_model.h"

namespace amor::dist {

// Sequences [rank*b, (rank+1)*b) of global (tokens, targets [W*b, T], sample_ids [W*b] if
// defined), b = B/world; views of global's storage.
model::Batch rank_slice(const model::Batch& global, int rank, int world);

}  // namespace amor::dist
