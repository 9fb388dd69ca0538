// The Communicator conveniences shared by every transport, and the watchdog's timeout setting.
#include "runner/dist/communicator.h"

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>

#include "kernels/core/error.h"

namespace amor::dist {

double Communicator::all_reduce_sum(double v) {
  all_reduce(&v, 1, ReduceOp::Sum);
  return v;
}

int64_t Communicator::all_reduce_sum(int64_t v) {
  all_reduce(&v, 1, ReduceOp::Sum);
  return v;
}

int64_t Communicator::all_reduce_max(int64_t v) {
  all_reduce(&v, 1, ReduceOp::Max);
  return v;
}

std::string Communicator::broadcast_string(const std::string& s, int root) {
  int64_t n = static_cast<int64_t>(s.size());
  broadcast(&n, sizeof n, root);
  std::string out = rank() == root ? s : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) broadcast(out.data(), static_cast<size_t>(n), root);
  return out;
}

double comm_timeout_seconds() {
  const char* env = std::getenv("AMOR_COMM_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return 300.0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  AMOR_CHECK(end != env && *end == '\0' && std::isfinite(v) && v > 0,
             "AMOR_COMM_TIMEOUT_S: '{}' is not a positive number of seconds", env);
  return v;
}

namespace {
std::mutex failure_mutex;
std::string first_failure;
}  // namespace

void record_comm_failure(const std::string& message) {
  std::lock_guard<std::mutex> lock(failure_mutex);
  if (first_failure.empty()) first_failure = message.empty() ? "communicator failure" : message;
}

std::string comm_failure() {
  std::lock_guard<std::mutex> lock(failure_mutex);
  return first_failure;
}

}  // namespace amor::dist
