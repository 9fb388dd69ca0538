// The shards of one split read as a single token stream: shard 0's tokens, then shard 1's, ...
// Opening checks every shard's header and that all come from one tokenizer, and (when the model's
// vocabulary size is given) that the tokenizer's vocabulary fits the model's embedding.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/shards/shard_reader.h"

namespace amor::data {

class TokenDataset {
 public:
  // `path` is a dataset folder (its <split>-NNNNN.tok shards are read) or a single .tok file
  // (split ignored). model_vocab_size > 0: a tokenizer with a larger vocabulary is an error.
  static TokenDataset open(const std::string& path, const std::string& split = "train",
                           int64_t model_vocab_size = 0);

  const std::string& path() const { return path_; }
  const std::string& tokenizer() const { return shards_.front()->header().tokenizer; }
  uint32_t vocab_size() const { return shards_.front()->header().vocab_size; }
  uint32_t eos_id() const { return shards_.front()->header().eos_id; }
  uint64_t size() const { return starts_.back(); }  // tokens in the stream
  uint64_t documents() const { return documents_; }
  size_t num_shards() const { return shards_.size(); }

  // Copies stream tokens [offset, offset + count), crossing shard boundaries as needed.
  void read(uint64_t offset, uint64_t count, int32_t* out) const;

 private:
  std::string path_;
  std::vector<std::shared_ptr<shards::TokenShard>> shards_;  // shared: datasets are copyable handles
  std::vector<uint64_t> starts_;  // starts_[i] = first stream offset of shard i; back() = size
  uint64_t documents_ = 0;
};

}  // namespace amor::data
