// DataLoader: packed, shuffled, rank-split, resumable batches (see data_loader.h).
#include "data/loader/data_loader.h"

#include "data/loader/permutation.h"
#include "data/loader/rank_split.h"
#include "kernels/core/error.h"

namespace amor::data {

DataLoader::DataLoader(TokenDataset data, LoaderOptions o) : data_(std::move(data)), opt_(o) {
  AMOR_CHECK(o.seq_len > 0, "DataLoader: seq_len must be positive, got {}", o.seq_len);
  AMOR_CHECK(o.batch_size > 0, "DataLoader: batch_size must be positive, got {}", o.batch_size);
  AMOR_CHECK(o.world > 0 && o.rank >= 0 && o.rank < o.world, "DataLoader: rank {} of world {} is out of range",
             o.rank, o.world);
  const auto L = static_cast<uint64_t>(o.seq_len);
  num_sequences_ = data_.size() > L ? (data_.size() - 1) / L : 0;
  AMOR_CHECK(num_sequences_ > 0, "{}: {} tokens make no sequence of seq_len + 1 = {} tokens", data_.path(),
             data_.size(), L + 1);
}

void DataLoader::set_position(const LoaderPosition& p) {
  AMOR_CHECK(p.index < num_sequences_,
             "{}: cannot resume at sequence {} of epoch {}: the data packs into {} sequences of {} tokens (was it "
             "re-prepared, or seq_len changed?)",
             data_.path(), p.index, p.epoch, num_sequences_, opt_.seq_len);
  pos_ = p;
}

uint64_t DataLoader::sequence_at(uint64_t epoch, uint64_t index) {
  if (!opt_.shuffle) return index;
  if (epoch != cached_epoch_) {
    uint64_t s = opt_.seed;
    uint64_t epoch_seed = splitmix64(s) ^ epoch;
    order_ = seeded_permutation(num_sequences_, splitmix64(epoch_seed));
    cached_epoch_ = epoch;
  }
  return order_[index];
}

Batch DataLoader::next() {
  const int64_t b = opt_.batch_size, L = opt_.seq_len;
  const uint64_t S = num_sequences_;
  const RankSplit split(b, opt_.rank, opt_.world);
  Batch out;
  out.start = pos_;
  out.tokens = Tensor::empty({b, L}, DType::I32);
  out.targets = Tensor::empty({b, L}, DType::I32);
  int32_t* tok = out.tokens.data<int32_t>();
  int32_t* tgt = out.targets.data<int32_t>();
  std::vector<int32_t> row(static_cast<size_t>(L) + 1);
  // Element g of the global order sits at epoch pos.epoch + (pos.index + g) / S.
  for (int64_t j = 0; j < b; ++j) {
    uint64_t g = pos_.index + static_cast<uint64_t>(split.global_row(j));
    uint64_t seq = sequence_at(pos_.epoch + g / S, g % S);
    data_.read(seq * static_cast<uint64_t>(L), static_cast<uint64_t>(L) + 1, row.data());
    std::copy(row.begin(), row.end() - 1, tok + j * L);
    std::copy(row.begin() + 1, row.end(), tgt + j * L);
    out.sequences.push_back(seq);
  }
  uint64_t end = pos_.index + global_batch();
  pos_ = LoaderPosition{pos_.epoch + end / S, end % S};
  return out;
}

}  // namespace amor::data
