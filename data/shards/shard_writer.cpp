// ShardWriter: streaming, atomic token shard writes (see shard_writer.h).
#include "data/shards/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kernels/core/error.h"

namespace amor::shards {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    AMOR_CHECK(w > 0, "{}: write failed: {}", path, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

ShardWriter::ShardWriter(std::string path, ShardInfo info) : path_(std::move(path)) {
  header_.tokenizer = std::move(info.tokenizer);
  header_.vocab_size = info.vocab_size;
  header_.eos_id = info.eos_id;
  header_.token_bytes = token_bytes_for_vocab(info.vocab_size);
  validate_header(header_, path_);
  std::filesystem::path p(path_);
  // Hidden and unique, in the same folder so that rename() is atomic.
  temp_path_ = (p.parent_path() / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid())))
                   .string();
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  AMOR_CHECK(fd_ >= 0, "{}: cannot create {}: {}", path_, temp_path_, std::strerror(errno));
  buffer_.reserve(kBufferBytes);
  // Placeholder header; finish() writes the real one once the counts are known.
  std::string zeros(kHeaderBytes, '\0');
  write_all(fd_, zeros.data(), zeros.size(), temp_path_);
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void ShardWriter::add_document(std::span<const int32_t> tokens) {
  AMOR_CHECK(!finished_, "{}: add_document after finish()", path_);
  static_assert(std::endian::native == std::endian::little, "token shards are little-endian");
  auto put = [&](uint32_t id) {
    if (buffer_.size() + 4 > kBufferBytes) flush_buffer();
    unsigned char b[4];
    std::memcpy(b, &id, 4);
    buffer_.insert(buffer_.end(), b, b + header_.token_bytes);
  };
  // Check the whole document first, so a rejected one leaves the shard as it was.
  for (int32_t t : tokens) {
    AMOR_CHECK(t >= 0 && static_cast<uint32_t>(t) < header_.vocab_size,
               "{}: token id {} is outside the vocabulary of {} (tokenizer '{}')", path_, t,
               header_.vocab_size, header_.tokenizer);
  }
  for (int32_t t : tokens) {
    put(static_cast<uint32_t>(t));
    if (static_cast<uint32_t>(t) == header_.eos_id) header_.document_count++;
  }
  put(header_.eos_id);
  header_.document_count++;
  header_.token_count += tokens.size() + 1;
}

void ShardWriter::flush_buffer() {
  write_all(fd_, buffer_.data(), buffer_.size(), temp_path_);
  buffer_.clear();
}

void ShardWriter::finish() {
  if (finished_) return;
  flush_buffer();
  std::vector<unsigned char>().swap(buffer_);  // finished writers wait for commit(): hold no buffer
  std::string h = encode_header(header_);
  AMOR_CHECK(::lseek(fd_, 0, SEEK_SET) == 0, "{}: seek failed: {}", temp_path_, std::strerror(errno));
  write_all(fd_, h.data(), h.size(), temp_path_);
  AMOR_CHECK(::fsync(fd_) == 0, "{}: fsync failed: {}", temp_path_, std::strerror(errno));
  AMOR_CHECK(::close(fd_) == 0, "{}: close failed: {}", temp_path_, std::strerror(errno));
  fd_ = -1;
  finished_ = true;
}

void ShardWriter::commit() {
  finish();
  AMOR_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, "{}: cannot rename {} into place: {}",
             path_, temp_path_, std::strerror(errno));
  committed_ = true;
}

void write_shard(const std::string& path, const ShardInfo& info,
                 const std::vector<std::vector<int32_t>>& documents) {
  ShardWriter w(path, info);
  for (const auto& d : documents) w.add_document(d);
  w.commit();
  std::string dir = std::filesystem::path(path).parent_path().string();
  sync_directory(dir.empty() ? "." : dir);
}

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  AMOR_CHECK(fd >= 0, "{}: cannot open the folder to sync it: {}", dir, std::strerror(errno));
  ::fsync(fd);  // best effort: some file systems refuse fsync on folders
  ::close(fd);
}

}  // namespace amor::shards
