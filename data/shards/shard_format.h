// The token shard file format (design §7): what a shard's header holds, and how it is encoded,
// decoded and validated. Writing and reading files live in shard_writer.h / shard_reader.h.
//
// Layout (all integers little-endian), 128-byte header then the tokens:
//   0   8  magic "AMORTOK\0"
//   8   4  u32 version (1)
//   12  4  u32 token width in bytes: 2 (vocabularies up to 65536) or 4
//   16  8  u64 token count
//   24  4  u32 vocabulary size of the tokenizer
//   28  4  u32 EOS id (documents are separated by it: each document's tokens then EOS)
//   32  8  u64 document count (number of EOS tokens in the shard)
//   40 24  reserved, zero
//   64 64  tokenizer name, UTF-8, NUL-padded (at most 63 bytes)
//   128    token_count tokens of `width` bytes each
// The header is 128 bytes so that the tokens start aligned for mmap reads.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace amor::shards {

inline constexpr char kMagic[8] = {'A', 'M', 'O', 'R', 'T', 'O', 'K', '\0'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 128;
inline constexpr size_t kNameBytes = 64;  // including the terminating NUL
inline constexpr size_t kNameOffset = 64;

// What a shard says about itself (everything in the header except the magic and version).
struct ShardHeader {
  uint32_t token_bytes = 2;  // 2 or 4
  uint64_t token_count = 0;
  uint32_t vocab_size = 0;
  uint32_t eos_id = 0;
  uint64_t document_count = 0;
  std::string tokenizer;  // e.g. "byte", "gpt2", "llama3"
};

// The narrowest width that holds every id of a vocabulary.
uint32_t token_bytes_for_vocab(uint64_t vocab_size);

// Checks a header's fields against each other (width fits the vocabulary, EOS inside it, name
// length); `source` names the file in the error.
void validate_header(const ShardHeader& h, const std::string& source);

// Encodes a (validated) header into exactly kHeaderBytes bytes.
std::string encode_header(const ShardHeader& h);

// Decodes and validates the first bytes of a file of `file_bytes` bytes: magic, version, width,
// fields, and that the file length equals header + token_count * width. Errors name `source`.
ShardHeader decode_header(std::string_view bytes, uint64_t file_bytes, const std::string& source);

}  // namespace amor::shards
