// The training/evaluation loader: packs a split's token stream into fixed-length sequences and
// hands out batches of them, deterministically, split over the ranks of a run, resumable.
//
// Packing: the shards hold documents each followed by EOS; the stream is cut into sequences of
// seq_len + 1 tokens, sequence k = stream[k*seq_len, k*seq_len + seq_len + 1) (consecutive
// sequences share one boundary token, so every token after the first is a target exactly once per
// epoch); tokens = its first seq_len, targets = its last seq_len. Documents are not padded:
// attention sees across EOS, as in GPT-style pretraining. The tail that does not fill a sequence
// is dropped.
//
// Order: epoch e visits all S sequences once, in a permutation seeded by (seed, e) (or in stream
// order with shuffle off). The global order is epoch 0's sequences, then epoch 1's, ...; a global
// batch is the next world*batch_size of them, dealt over the ranks by the one rule of
// rank_split.h: rank r takes the contiguous block [r*b, (r+1)*b) (row j = global-batch element
// r*b + j). So W ranks with micro-batch b read exactly the sequences one rank with micro-batch
// W*b reads, in the same order. A batch may straddle an epoch
// boundary: nothing is dropped or repeated at epoch ends.
//
// Resume: position() (epoch, index: where the next global batch starts) is the same on every
// rank; a loader given set_position(p) continues with exactly the batches the original would
// have produced after p.
#pragma once
#include <cstdint>
#include <vector>

#include "data/loader/token_dataset.h"
#include "kernels/core/tensor.h"

namespace amor::data {

struct LoaderOptions {
  int64_t seq_len = 0;     // input tokens per row
  int64_t batch_size = 0;  // rows per rank per next() (the micro-batch)
  int rank = 0;
  int world = 1;
  uint64_t seed = 0;
  bool shuffle = true;  // false: stream order (evaluation)
};

struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;  // in [0, num_sequences): the next global batch's first element
  bool operator==(const LoaderPosition&) const = default;
};

struct Batch {
  Tensor tokens;   // i32 [batch_size, seq_len]
  Tensor targets;  // i32 [batch_size, seq_len]: tokens shifted left by one
  std::vector<uint64_t> sequences;  // which sequence each row is (index into the packed stream)
  LoaderPosition start;             // position() before this batch
};

class DataLoader {
 public:
  DataLoader(TokenDataset data, LoaderOptions options);

  Batch next();
  LoaderPosition position() const { return pos_; }
  void set_position(const LoaderPosition& p);  // index must be < num_sequences()

  uint64_t num_sequences() const { return num_sequences_; }
  uint64_t global_batch() const { return static_cast<uint64_t>(opt_.world) * opt_.batch_size; }
  const TokenDataset& dataset() const { return data_; }
  const LoaderOptions& options() const { return opt_; }

 private:
  uint64_t sequence_at(uint64_t epoch, uint64_t index);
  TokenDataset data_;
  LoaderOptions opt_;
  uint64_t num_sequences_ = 0;
  LoaderPosition pos_;
  uint64_t cached_epoch_ = UINT64_MAX;
  std::vector<uint32_t> order_;  // the cached epoch's permutation
};

}  // namespace amor::data
