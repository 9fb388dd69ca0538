// Reads one token shard: opens and validates it (magic, version, width, that the file length
// matches the count), maps the tokens read-only, and copies ranges out as int32 ids.
//
// Mapping (not reading) the file keeps opening a dataset of many large shards cheap: only the
// pages a batch touches are read, and the page cache is shared by all ranks on a node.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/shards/shard_format.h"

namespace amor::shards {

class TokenShard {
 public:
  // Throws amor::Error naming `path` if the file is missing, unreadable or not a valid shard.
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  const ShardHeader& header() const { return header_; }
  uint64_t size() const { return header_.token_count; }

  // Copies tokens [offset, offset + count) into out. Ids at or above the vocabulary size (a
  // corrupted file) are an error naming the file and the token's position.
  void read(uint64_t offset, uint64_t count, int32_t* out) const;
  int32_t at(uint64_t i) const;

 private:
  std::string path_;
  ShardHeader header_;
  const unsigned char* map_ = nullptr;
  size_t map_bytes_ = 0;
};

}  // namespace amor::shards
