// What `amor-data stats` reports about a dataset folder or one shard: per split, the shards,
// documents, tokens and tokens per document, after checking every shard (header, length, every
// id inside the vocabulary, EOS count equal to the header's document count) and that all shards
// of the folder come from one tokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace amor::shards {

struct SplitSummary {
  std::string split;  // "train", "valid", or the file name for a single shard
  uint64_t shards = 0, documents = 0, tokens = 0, bytes = 0;
};

struct DatasetSummary {
  std::string path;
  std::string tokenizer;
  uint32_t vocab_size = 0, eos_id = 0, token_bytes = 0;
  std::vector<SplitSummary> splits;
};

DatasetSummary summarize_shards(const std::string& dir_or_file);
std::string format_summary(const DatasetSummary& s);

}  // namespace amor::shards
