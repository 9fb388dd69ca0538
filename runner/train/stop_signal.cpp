#include "runner/train/stop_signal.h"

#include <atomic>
#include <csignal>

#include "kernels/core/error.h"

namespace amor {
namespace {
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) { g_signal.store(sig); }
}  // namespace

void install_stop_handlers(const std::string& user_signal) {
  std::signal(SIGTERM, on_stop_signal);
  if (user_signal == "SIGUSR1") {
    std::signal(SIGUSR1, on_stop_signal);
  } else if (user_signal == "SIGUSR2") {
    std::signal(SIGUSR2, on_stop_signal);
  } else {
    AMOR_CHECK(user_signal.empty(), "checkpoint.signal: '{}' is not one of SIGUSR1, SIGUSR2 or ''",
               user_signal);
  }
}

bool stop_requested() { return g_signal.load() != 0; }

std::string stop_signal_name() {
  switch (g_signal.load()) {
    case 0: return "";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal " + std::to_string(g_signal.load());
  }
}

void clear_stop_request() { g_signal.store(0); }

}  // namespace amor
