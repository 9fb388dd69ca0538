// The one rule for how a run's global micro-batch is dealt over its W ranks, used by every data
// source (DataLoader, the runner's example source) and by dist::rank_slice:
//
//   a global micro-batch is W*b consecutive sequences of the global order; rank r holds the
//   contiguous block [r*b, (r+1)*b) of it, rows in order (row j of rank r = global row r*b + j).
//
// Contiguous blocks in rank order are also the order in which a run group's gather_flat
// concatenates per-rank values (runner/dist/run_group.h), so whatever a model computes over the
// whole micro-batch (AMOR's gate statistics) sees the one-rank run's values in the one-rank
// order, and W ranks with micro-batch b read exactly the sequences of one rank with W*b.
#pragma once
#include <cstdint>

#include "kernels/core/error.h"

namespace amor::data {

class RankSplit {
 public:
  // b sequences per rank, world ranks; this is `rank`'s share.
  RankSplit(int64_t per_rank, int rank, int world) : b_(per_rank), rank_(rank), world_(world) {
    AMOR_CHECK(world >= 1 && rank >= 0 && rank < world, "rank split: rank {} of world size {} is not a rank",
               rank, world);
    AMOR_CHECK(per_rank >= 0, "rank split: {} sequences per rank", per_rank);
  }
  // A global micro-batch of `global` sequences: it must divide evenly (no rank holds more).
  static RankSplit of_global(int64_t global, int rank, int world) {
    AMOR_CHECK(world >= 1 && global % world == 0,
               "the global micro-batch of {} sequences does not split over {} ranks; make it a "
               "multiple of the world size", global, world);
    return RankSplit(global / world, rank, world);
  }

  int64_t per_rank() const { return b_; }
  int64_t global_size() const { return b_ * world_; }
  // The global row of this rank's row j.
  int64_t global_row(int64_t j) const { return static_cast<int64_t>(rank_) * b_ + j; }
  int64_t first() const { return global_row(0); }

 private:
  int64_t b_;
  int rank_, world_;
};

}  // namespace amor::data
