#include "runner/app/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/core/error.h"
#include "runner/output/run_file.h"

namespace amor {

RunLock::RunLock(const std::filesystem::path& run_dir) {
  const std::string path = (run_dir / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  AMOR_CHECK(fd_ >= 0, "cannot open the run lock {}: {}", path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("unknown");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(fd_);
    fd_ = -1;
    AMOR_CHECK(err == EWOULDBLOCK, "cannot lock {}: {}", path, std::strerror(err));
    throw Error(fmt::format("run folder {} is in use by another amor-run (pid host start: {}); wait "
                            "for it to finish or stop it, then run again (it resumes from its last "
                            "checkpoint)",
                            run_dir.string(), who));
  }
  char host[128] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("{} {} {}\n", ::getpid(), host, utc_timestamp());
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t w = ::pwrite(fd_, me.data(), me.size(), 0);
    (void)w;  // the note is informative; the lock is what matters
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace amor
