// TokenDataset: a split's shards as one stream (see token_dataset.h).
#include "data/loader/token_dataset.h"

#include <algorithm>
#include <filesystem>

#include "data/shards/shard_files.h"
#include "kernels/core/error.h"

namespace fs = std::filesystem;

namespace amor::data {

TokenDataset TokenDataset::open(const std::string& path, const std::string& split, int64_t model_vocab_size) {
  TokenDataset d;
  d.path_ = path;
  std::error_code ec;
  AMOR_CHECK(fs::exists(path, ec), "{}: no such token shard or dataset folder", path);
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    files = shards::list_shard_files(path, split);
    AMOR_CHECK(!files.empty(), "{}: no '{}' shards ({}); prepare data with `amor-data convert`", path, split,
               shards::shard_file_name(split, 0));
  } else {
    files = {path};
  }
  d.starts_.push_back(0);
  for (const std::string& f : files) {
    auto s = std::make_shared<shards::TokenShard>(f);
    if (!d.shards_.empty()) {
      const auto& a = d.shards_.front()->header();
      const auto& b = s->header();
      AMOR_CHECK(a.tokenizer == b.tokenizer && a.vocab_size == b.vocab_size && a.eos_id == b.eos_id,
                 "{}: tokenizer '{}' (vocabulary {}, EOS {}) differs from {}'s '{}' (vocabulary {}, EOS {})", f,
                 b.tokenizer, b.vocab_size, b.eos_id, files.front(), a.tokenizer, a.vocab_size, a.eos_id);
    }
    d.documents_ += s->header().document_count;
    d.starts_.push_back(d.starts_.back() + s->size());
    d.shards_.push_back(std::move(s));
  }
  AMOR_CHECK(model_vocab_size <= 0 || d.vocab_size() <= static_cast<uint64_t>(model_vocab_size),
             "{}: tokenizer '{}' has a vocabulary of {} but the model's vocab_size is {}: its ids would fall "
             "outside the embedding (prepare the data with the model's tokenizer, or raise vocab_size)",
             files.front(), d.tokenizer(), d.vocab_size(), model_vocab_size);
  return d;
}

void TokenDataset::read(uint64_t offset, uint64_t count, int32_t* out) const {
  AMOR_CHECK(offset <= size() && count <= size() - offset, "{}: read of tokens [{}, {}) past the end ({} tokens)",
             path_, offset, offset + count, size());
  // First shard holding `offset`: the last start <= offset.
  size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin()) - 1;
  while (count > 0) {
    uint64_t local = offset - starts_[i];
    uint64_t n = std::min(count, shards_[i]->size() - local);
    shards_[i]->read(local, n, out);
    out += n;
    offset += n;
    count -= n;
    ++i;
  }
}

}  // namespace amor::data
