// write_file_atomically (see atomic_file.h).
#include "data/shards/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kernels/core/error.h"

namespace amor::shards {

void write_file_atomically(const std::string& path, const std::string& bytes) {
  std::filesystem::path p(path);
  std::string tmp = (p.parent_path() / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  AMOR_CHECK(fd >= 0, "{}: cannot create {}: {}", path, tmp, std::strerror(errno));
  const char* at = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t w = ::write(fd, at, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("{}: write failed: {}", path, std::strerror(e)));
    }
    at += w;
    left -= static_cast<size_t>(w);
  }
  int synced = ::fsync(fd);
  int e = errno;
  if (::close(fd) != 0 && synced == 0) synced = -1, e = errno;
  if (synced == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) synced = -1, e = errno;
  if (synced != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: cannot write: {}", path, std::strerror(e)));
  }
}

}  // namespace amor::shards
