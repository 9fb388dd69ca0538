// Token shard header: encoding, decoding and validation (format in shard_format.h).
#include "data/shards/shard_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/core/error.h"

namespace amor::shards {
namespace {

void put_u32(std::string& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}
uint64_t get_u64(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

// Printable form of the first 8 bytes of a foreign file, for the "not a shard" message.
std::string show_magic(std::string_view m) {
  std::string s;
  for (unsigned char c : m) {
    if (c >= 0x20 && c < 0x7f && c != '\\') s += static_cast<char>(c);
    else s += fmt::format("\\x{:02x}", c);
  }
  return s;
}

}  // namespace

uint32_t token_bytes_for_vocab(uint64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

void validate_header(const ShardHeader& h, const std::string& source) {
  AMOR_CHECK(h.token_bytes == 2 || h.token_bytes == 4,
             "{}: token width {} bytes is not supported (expected 2 or 4)", source, h.token_bytes);
  AMOR_CHECK(h.vocab_size > 0 && h.vocab_size <= 0x7fffffffu,
             "{}: vocabulary size {} is out of range (1 .. 2^31-1)", source, h.vocab_size);
  AMOR_CHECK(h.token_bytes == 4 || h.vocab_size <= 65536,
             "{}: 2-byte tokens cannot hold a vocabulary of {} (at most 65536)", source, h.vocab_size);
  AMOR_CHECK(h.eos_id < h.vocab_size, "{}: EOS id {} is outside the vocabulary of {}", source,
             h.eos_id, h.vocab_size);
  AMOR_CHECK(h.document_count <= h.token_count,
             "{}: {} documents in {} tokens (each document ends with an EOS token)", source,
             h.document_count, h.token_count);
  AMOR_CHECK(h.tokenizer.size() < kNameBytes && h.tokenizer.find('\0') == std::string::npos,
             "{}: tokenizer name '{}' is longer than {} bytes or holds a NUL", source, h.tokenizer,
             kNameBytes - 1);
}

std::string encode_header(const ShardHeader& h) {
  validate_header(h, "encode_header");
  std::string b(kHeaderBytes, '\0');
  std::memcpy(b.data(), kMagic, sizeof(kMagic));
  put_u32(b, 8, kVersion);
  put_u32(b, 12, h.token_bytes);
  put_u64(b, 16, h.token_count);
  put_u32(b, 24, h.vocab_size);
  put_u32(b, 28, h.eos_id);
  put_u64(b, 32, h.document_count);
  std::memcpy(b.data() + kNameOffset, h.tokenizer.data(), h.tokenizer.size());
  return b;
}

ShardHeader decode_header(std::string_view b, uint64_t file_bytes, const std::string& source) {
  // The magic first (as far as the file goes), so a foreign small file is "not a token shard".
  size_t magic_bytes = std::min(b.size(), sizeof(kMagic));
  AMOR_CHECK(std::memcmp(b.data(), kMagic, magic_bytes) == 0,
             "{}: not a token shard (magic '{}', expected 'AMORTOK\\x00')", source,
             show_magic(b.substr(0, 8)));
  AMOR_CHECK(file_bytes >= kHeaderBytes && b.size() >= kHeaderBytes,
             "{}: truncated token shard: {} bytes, shorter than the {}-byte header", source,
             file_bytes, kHeaderBytes);
  uint32_t version = get_u32(b, 8);
  AMOR_CHECK(version == kVersion, "{}: token shard version {} is not supported (this build reads version {})",
             source, version, kVersion);
  ShardHeader h;
  h.token_bytes = get_u32(b, 12);
  h.token_count = get_u64(b, 16);
  h.vocab_size = get_u32(b, 24);
  h.eos_id = get_u32(b, 28);
  h.document_count = get_u64(b, 32);
  std::string_view name = b.substr(kNameOffset, kNameBytes);
  size_t nul = name.find('\0');
  AMOR_CHECK(nul != std::string_view::npos, "{}: the tokenizer name field is not NUL-terminated", source);
  h.tokenizer = std::string(name.substr(0, nul));
  validate_header(h, source);
  // Overflow-safe: token_count * width must equal the payload exactly.
  uint64_t payload = file_bytes - kHeaderBytes;
  AMOR_CHECK(payload % h.token_bytes == 0 && payload / h.token_bytes == h.token_count,
             "{}: {} token shard: the header says {} tokens of {} bytes ({} bytes with the header) "
             "but the file has {} bytes",
             source, payload / h.token_bytes < h.token_count ? "truncated" : "malformed",
             h.token_count, h.token_bytes,
             h.token_count <= (UINT64_MAX - kHeaderBytes) / h.token_bytes
                 ? fmt::format("{}", kHeaderBytes + h.token_count * h.token_bytes)
                 : std::string("too many"),
             file_bytes);
  return h;
}

}  // namespace amor::shards
