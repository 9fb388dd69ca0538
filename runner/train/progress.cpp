#include "runner/train/progress.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>

#include <cmath>

#include <fmt/format.h>

namespace amor {

bool live_progress(const ProgressContext& c) {
  if (c.mode == "plain") return false;
  if (c.mode == "live") return true;
  return c.groups == 1 && !c.slurm_job && c.stdout_terminal;
}

bool stdout_reaches_terminal() {
  if (!::isatty(::fileno(stdout))) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return true;
  // Under mpirun: is mpirun's (the parent's) stdout a terminal? Linux tty majors: 4 (ttyN), 5
  // (/dev/tty, console), 136-143 (/dev/pts/N). A remote orted's never is.
  struct stat st {};
  const std::string fd1 = "/proc/" + std::to_string(::getppid()) + "/fd/1";
  if (::stat(fd1.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  const unsigned maj = major(st.st_rdev);
  return maj == 4 || maj == 5 || (maj >= 136 && maj <= 143);
}

Progress::Progress(std::string run_name, int64_t total_steps, int64_t log_every, std::FILE* out,
                   std::optional<bool> force_tty)
    : run_(std::move(run_name)),
      total_(total_steps),
      every_(log_every > 0 ? log_every : 1),
      out_(out),
      tty_(force_tty ? *force_tty : ::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, static_cast<int>(t % 3600 / 60));
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, static_cast<int>(t % 60));
  return fmt::format("{}s", t);
}

std::string Progress::format(const ProgressRow& r, double eta) const {
  std::string bar;
  if (tty_) {
    const int width = 12;
    int filled = total_ > 0 ? static_cast<int>(width * r.step / total_) : 0;
    bar = " [" + std::string(static_cast<size_t>(filled), '#') +
          std::string(static_cast<size_t>(width - filled), '.') + "]";
  }
  std::string tps = r.tokens_per_s >= 1000 ? fmt::format("{:.1f}k", r.tokens_per_s / 1000)
                                           : fmt::format("{:.0f}", r.tokens_per_s);
  std::string line = fmt::format("{} step {:>{}}/{}{}  loss {:.4f}  lr {:.1e}  {} tok/s", run_, r.step,
                                 std::to_string(total_).size(), total_, bar, r.loss, r.lr, tps);
  for (const auto& [label, value] : r.metrics) line += fmt::format("  {} {:.3f}", label, value);
  line += "  ETA " + format_duration(eta);
  return line;
}

void Progress::update(const ProgressRow& r) {
  if (first_step_ < 0) {
    first_step_ = r.step - 1;
    start_ = std::chrono::steady_clock::now();
  }
  bool due = tty_ || r.step % every_ == 0 || r.step == total_;
  if (!due) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double done = static_cast<double>(r.step - first_step_);
  double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - r.step) : NAN;
  std::string line = format(r, eta);
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::note(const std::string& message) {
  if (tty_) std::fprintf(out_, "\r\033[K");  // the live bar is redrawn by the next update
  std::fprintf(out_, "%s %s\n", run_.c_str(), message.c_str());
  std::fflush(out_);
}

void Progress::finish(const std::string& message) {
  if (tty_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s %s\n", run_.c_str(), message.c_str());
  std::fflush(out_);
}

}  // namespace amor
