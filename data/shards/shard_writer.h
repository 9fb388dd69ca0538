// Writes one token shard: documents are appended as they are tokenised (each followed by EOS)
// into a hidden temporary file beside the target; finish() completes the header and syncs it,
// commit() renames it into place. A writer destroyed before commit() deletes its temporary file,
// so a crash or an error never leaves a half-written shard under the real name.
//
// The two steps let the converter finish every shard of a corpus first and rename them all only
// once the whole corpus has gone through without an error.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/shards/shard_format.h"

namespace amor::shards {

// The tokenizer facts a shard records; the width follows from vocab_size.
struct ShardInfo {
  std::string tokenizer;
  uint32_t vocab_size = 0;
  uint32_t eos_id = 0;
};

class ShardWriter {
 public:
  ShardWriter(std::string path, ShardInfo info);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends a document's tokens and an EOS. Every id must be inside the vocabulary.
  void add_document(std::span<const int32_t> tokens);

  uint64_t token_count() const { return header_.token_count; }
  uint64_t document_count() const { return header_.document_count; }
  const std::string& path() const { return path_; }

  void finish();  // writes the header, fsyncs and closes the temporary file
  void commit();  // renames the finished temporary file onto path() (finish()es first if needed)

 private:
  void flush_buffer();
  std::string path_;
  std::string temp_path_;
  ShardHeader header_;
  int fd_ = -1;
  std::vector<unsigned char> buffer_;
  bool finished_ = false;
  bool committed_ = false;
};

// One call: writes `documents` as a shard at `path` atomically.
void write_shard(const std::string& path, const ShardInfo& info,
                 const std::vector<std::vector<int32_t>>& documents);

// fsyncs a directory so that renames inside it survive a crash.
void sync_directory(const std::string& dir);

}  // namespace amor::shards
