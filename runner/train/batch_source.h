// Where a run's micro-batches come from, whatever the data: a token stream (the built-in corpus
// or a user's shards, through data/loader) or a fixed set of examples (synthetic tasks such as
// MQAR, whose targets are -100 except at the answers).
//
// Every source deals the run's global micro-batch of W*b sequences over its W ranks by the one
// rule of data/loader/rank_split.h (rank r: the contiguous block [r*b, (r+1)*b)), so W ranks
// with micro-batch b read exactly what one rank with micro-batch W*b reads; each sequence comes
// with its global sample id (model::Batch::sample_ids). The position is saved in checkpoints and
// restored on resume, so no sample is repeated or skipped.
#pragma once
#include <memory>
#include <string>

#include "data/loader/data_loader.h"
#include "data/synthetic/token_task.h"
#include "models/lm/language_model.h"

namespace amor {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual model::Batch next() = 0;
  virtual std::string position() const = 0;  // "epoch:index", opaque to callers
  virtual void set_position(const std::string& pos) = 0;
  virtual int64_t sequences() const = 0;     // in one pass (epoch) over the data
};

// A token stream packed into sequences by data::DataLoader.
std::unique_ptr<BatchSource> stream_source(data::TokenDataset dataset, int64_t seq_len,
                                           int64_t micro_batch, int rank, int world, uint64_t seed,
                                           bool shuffle);

// Fixed examples (tokens and targets [n, T]); shuffled each epoch by seed when shuffle is set.
std::unique_ptr<BatchSource> example_source(synthetic::TokenTask task, int64_t micro_batch,
                                            int rank, int world, uint64_t seed, bool shuffle);

}  // namespace amor
