// TokenShard: validated, memory-mapped token shard reads (see shard_reader.h).
#include "data/shards/shard_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "kernels/core/error.h"

namespace amor::shards {

TokenShard::TokenShard(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  AMOR_CHECK(fd >= 0, "{}: cannot open token shard: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  std::string head(kHeaderBytes, '\0');
  ssize_t got = ::pread(fd, head.data(), std::min<uint64_t>(file_bytes, kHeaderBytes), 0);
  if (got < 0) {
    int e = errno;
    ::close(fd);
    throw Error(fmt::format("{}: read failed: {}", path, std::strerror(e)));
  }
  try {
    header_ = decode_header(std::string_view(head.data(), static_cast<size_t>(got)), file_bytes, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  map_bytes_ = static_cast<size_t>(file_bytes);
  void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);  // the mapping keeps the file alive
  AMOR_CHECK(m != MAP_FAILED, "{}: mmap failed: {}", path, std::strerror(e));
  map_ = static_cast<const unsigned char*>(m);
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void TokenShard::read(uint64_t offset, uint64_t count, int32_t* out) const {
  AMOR_CHECK(offset <= header_.token_count && count <= header_.token_count - offset,
             "{}: read of tokens [{}, {}) past the end ({} tokens)", path_, offset, offset + count,
             header_.token_count);
  static_assert(std::endian::native == std::endian::little, "token shards are little-endian");
  const unsigned char* base = map_ + kHeaderBytes;
  const uint32_t vocab = header_.vocab_size;
  uint32_t bad = 0;
  if (header_.token_bytes == 2) {
    const unsigned char* p = base + 2 * offset;
    for (uint64_t i = 0; i < count; ++i) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out[i] = static_cast<int32_t>(v);
      bad |= static_cast<uint32_t>(v >= vocab);
    }
  } else {
    const unsigned char* p = base + 4 * offset;
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = static_cast<int32_t>(v);
      bad |= static_cast<uint32_t>(v >= vocab);
    }
  }
  if (bad) {  // find it for the message (the rare path)
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t v = static_cast<uint32_t>(out[i]);
      AMOR_CHECK(v < vocab, "{}: corrupted token shard: token {} has id {}, outside the vocabulary of {}",
                 path_, offset + i, v, vocab);
    }
  }
}

int32_t TokenShard::at(uint64_t i) const {
  int32_t v;
  read(i, 1, &v);
  return v;
}

}  // namespace amor::shards
