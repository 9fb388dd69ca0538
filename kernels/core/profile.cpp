#include "kernels/core/profile.h"

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "kernels/core/backend.h"
#include "kernels/core/env_switch.h"

namespace amor::profile {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  int enabled = -1;  // -1: not read from the environment yet
  Device device = Device::CPU;
  std::vector<Row> rows;
  std::map<std::string, size_t> index;
  std::vector<size_t> stack;  // open sections (row indices), innermost last
  Clock::time_point mark;     // when the innermost open section last (re)started
};

State& state() {
  static State s;
  return s;
}

// Waits for the device's queued work, then reads the clock.
Clock::time_point now_synced() {
  State& s = state();
  if (s.device != Device::CPU) backend(s.device).synchronize();
  return Clock::now();
}

size_t row_of(const std::string& name) {
  State& s = state();
  auto it = s.index.find(name);
  if (it != s.index.end()) return it->second;
  s.rows.push_back(Row{name, 0, 0});
  s.index[name] = s.rows.size() - 1;
  return s.rows.size() - 1;
}

void open(const std::string& name) {
  State& s = state();
  const Clock::time_point t = now_synced();
  if (!s.stack.empty()) s.rows[s.stack.back()].seconds += std::chrono::duration<double>(t - s.mark).count();
  const size_t r = row_of(name);
  s.rows[r].calls += 1;
  s.stack.push_back(r);
  s.mark = t;
}

}  // namespace

bool enabled() {
  State& s = state();
  if (s.enabled < 0) {
    // "1" on; "0", unset or empty off; anything else is refused (env_switch.h).
    s.enabled = env_choice("AMOR_PROFILE", {"0", "1"}, "0") == "1" ? 1 : 0;
  }
  return s.enabled == 1;
}

void set_enabled(bool on) { state().enabled = on ? 1 : 0; }
void set_device(Device d) { state().device = d; }

Section::Section(const char* name) : active_(enabled()) {
  if (active_) open(name);
}

Section::Section(const std::string& name) : active_(enabled()) {
  if (active_) open(name);
}

Section::~Section() {
  if (!active_) return;
  State& s = state();
  if (s.stack.empty()) return;  // reset() inside the section
  const Clock::time_point t = now_synced();
  s.rows[s.stack.back()].seconds += std::chrono::duration<double>(t - s.mark).count();
  s.stack.pop_back();
  s.mark = t;
}

std::vector<Row> rows() { return state().rows; }

void reset() {
  State& s = state();
  for (Row& r : s.rows) r.seconds = 0, r.calls = 0;
  s.mark = Clock::now();
}

std::string format_table(const std::vector<Row>& rows, int64_t steps, double step_seconds) {
  const double n = static_cast<double>(steps > 0 ? steps : 1);
  double inside = 0;
  std::string out = fmt::format("{:<52} {:>10} {:>10} {:>7}\n", "section (exclusive time)", "calls/step",
                                "ms/step", "share");
  for (const Row& r : rows) {
    if (r.calls == 0) continue;
    inside += r.seconds;
    out += fmt::format("{:<52} {:>10.1f} {:>10.2f} {:>6.1f}%\n", r.name, static_cast<double>(r.calls) / n,
                       1e3 * r.seconds / n, step_seconds > 0 ? 100.0 * r.seconds / step_seconds : 0.0);
  }
  const double outside = step_seconds - inside;
  out += fmt::format("{:<52} {:>10} {:>10.2f} {:>6.1f}%\n", "(outside every section)", "",
                     1e3 * outside / n, step_seconds > 0 ? 100.0 * outside / step_seconds : 0.0);
  out += fmt::format("{:<52} {:>10} {:>10.2f}\n", "step wall time", "", 1e3 * step_seconds / n);
  return out;
}

}  // namespace amor::profile
