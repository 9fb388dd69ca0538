#include "runner/train/batch_source.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "data/loader/rank_split.h"
#include "kernels/core/error.h"

namespace amor {
namespace {

std::pair<uint64_t, uint64_t> parse_position(const std::string& pos) {
  auto colon = pos.find(':');
  AMOR_CHECK(colon != std::string::npos, "checkpoint: data position '{}' is not epoch:index", pos);
  return {std::stoull(pos.substr(0, colon)), std::stoull(pos.substr(colon + 1))};
}

class StreamSource final : public BatchSource {
 public:
  StreamSource(data::TokenDataset dataset, data::LoaderOptions opt) : loader_(std::move(dataset), opt) {}
  model::Batch next() override {
    data::Batch b = loader_.next();
    Tensor ids = Tensor::empty({static_cast<int64_t>(b.sequences.size())}, DType::I64);
    for (size_t i = 0; i < b.sequences.size(); ++i)
      ids.data<int64_t>()[i] = static_cast<int64_t>(b.start.epoch * loader_.num_sequences() + b.sequences[i]);
    return {b.tokens, b.targets, ids};
  }
  std::string position() const override {
    auto p = loader_.position();
    return std::to_string(p.epoch) + ":" + std::to_string(p.index);
  }
  void set_position(const std::string& pos) override {
    auto [e, i] = parse_position(pos);
    loader_.set_position({e, i});
  }
  int64_t sequences() const override { return static_cast<int64_t>(loader_.num_sequences()); }

 private:
  data::DataLoader loader_;
};

class ExampleSource final : public BatchSource {
 public:
  ExampleSource(synthetic::TokenTask task, int64_t b, int rank, int world, uint64_t seed, bool shuffle)
      : task_(std::move(task)), b_(b), rank_(rank), world_(world), seed_(seed), shuffle_(shuffle) {
    n_ = task_.tokens.size(0);
    T_ = task_.tokens.size(1);
    AMOR_CHECK(n_ >= b_ * world_,
               "data: {} examples cannot fill one global micro-batch of {} sequences ({} ranks x {})",
               n_, b_ * world_, world_, b_);
  }
  model::Batch next() override {
    if (static_cast<int64_t>(index_) + b_ * world_ > n_) {  // a partial global batch is dropped
      epoch_++;
      index_ = 0;
    }
    const std::vector<int64_t>& order = order_for(epoch_);
    Tensor tokens = Tensor::empty({b_, T_}, DType::I32), targets = Tensor::empty({b_, T_}, DType::I32);
    Tensor ids = Tensor::empty({b_}, DType::I64);
    const data::RankSplit split(b_, rank_, world_);
    for (int64_t i = 0; i < b_; ++i) {
      int64_t row = order[static_cast<size_t>(static_cast<int64_t>(index_) + split.global_row(i))];
      std::copy_n(task_.tokens.data<int32_t>() + row * T_, T_, tokens.data<int32_t>() + i * T_);
      std::copy_n(task_.targets.data<int32_t>() + row * T_, T_, targets.data<int32_t>() + i * T_);
      ids.data<int64_t>()[i] = static_cast<int64_t>(epoch_) * n_ + row;
    }
    index_ += static_cast<uint64_t>(b_ * world_);
    return {tokens, targets, ids};
  }
  std::string position() const override { return std::to_string(epoch_) + ":" + std::to_string(index_); }
  void set_position(const std::string& pos) override {
    auto [e, i] = parse_position(pos);
    AMOR_CHECK(i <= static_cast<uint64_t>(n_), "checkpoint: data position {} is past the {} examples",
               pos, n_);
    epoch_ = e;
    index_ = i;
  }
  int64_t sequences() const override { return n_; }

 private:
  const std::vector<int64_t>& order_for(uint64_t epoch) {
    if (epoch != cached_epoch_) {
      order_.resize(static_cast<size_t>(n_));
      std::iota(order_.begin(), order_.end(), 0);
      if (shuffle_) {  // Fisher-Yates on the raw engine: the same order on every platform
        std::mt19937_64 rng(seed_ * 0x9e3779b97f4a7c15ull + epoch);
        for (int64_t i = n_ - 1; i > 0; --i)
          std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(rng() % static_cast<uint64_t>(i + 1))]);
      }
      cached_epoch_ = epoch;
    }
    return order_;
  }
  synthetic::TokenTask task_;
  int64_t b_, n_ = 0, T_ = 0;
  int rank_, world_;
  uint64_t seed_;
  bool shuffle_;
  uint64_t epoch_ = 0, index_ = 0, cached_epoch_ = UINT64_MAX;
  std::vector<int64_t> order_;
};

}  // namespace

std::unique_ptr<BatchSource> stream_source(data::TokenDataset dataset, int64_t seq_len,
                                           int64_t micro_batch, int rank, int world, uint64_t seed,
                                           bool shuffle) {
  data::LoaderOptions opt;
  opt.seq_len = seq_len;
  opt.batch_size = micro_batch;
  opt.rank = rank;
  opt.world = world;
  opt.seed = seed;
  opt.shuffle = shuffle;
  return std::make_unique<StreamSource>(std::move(dataset), opt);
}

std::unique_ptr<BatchSource> example_source(synthetic::TokenTask task, int64_t micro_batch, int rank,
                                            int world, uint64_t seed, bool shuffle) {
  return std::make_unique<ExampleSource>(std::move(task), micro_batch, rank, world, seed, shuffle);
}

}  // namespace amor
