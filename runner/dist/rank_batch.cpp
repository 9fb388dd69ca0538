// rank_slice: one rank's rows of a global micro-batch (data/loader/rank_split.h).
#include "runner/dist/rank_batch.h"

#include "data/loader/rank_split.h"
#include "kernels/core/error.h"

namespace amor::dist {

model::Batch rank_slice(const model::Batch& global, int rank, int world) {
  AMOR_CHECK(world >= 1 && rank >= 0 && rank < world, "rank_slice: rank {} of world size {} is not a rank",
             rank, world);
  AMOR_CHECK(global.tokens.defined() && global.tokens.dim() == 2 && global.targets.defined() &&
                 global.targets.shape() == global.tokens.shape(),
             "rank_slice: expected tokens and targets of one shape [B,T], got {} and {}",
             global.tokens.str(), global.targets.str());
  const int64_t B = global.tokens.size(0), T = global.tokens.size(1);
  const data::RankSplit split = data::RankSplit::of_global(B, rank, world);
  const int64_t b = split.per_rank();
  model::Batch out;
  out.tokens = global.tokens.slice_flat(split.first() * T, {b, T});
  out.targets = global.targets.slice_flat(split.first() * T, {b, T});
  if (global.sample_ids.defined()) {
    AMOR_CHECK(global.sample_ids.shape() == Shape{B}, "rank_slice: sample_ids is {}, expected [{}]",
               global.sample_ids.str(), B);
    out.sample_ids = global.sample_ids.slice_flat(split.first(), {b});
  }
  return out;
}

}  // namespace amor::dist
