// Where a training step's time goes, by section (AMOR_PROFILE=1): the model and the trainer mark
// sections (an embedding, a layer's mixer or MLP, the LM head, the optimizer step, ...) with
// profile::Section; with profiling on, each boundary synchronises the device and reads the host
// clock, and every section accumulates its exclusive time (time in a nested section is the
// nested section's). Off (the default), a Section is one branch on a cached flag.
//
// Why synchronise instead of CUDA events: one stream runs everything, so a synchronised boundary
// costs only the launch latency of the next kernel (~10 us, ~100 boundaries per step: well under
// 1% of a 1.5B step) and needs no device-specific code here; the sections' sum is compared with
// the step's wall time in the report, so what is outside every section stays visible.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"

namespace amor::profile {

// AMOR_PROFILE=1 (read once; 0, empty or unset: off; anything else is refused: env_switch.h), or
// set_enabled.
bool enabled();
void set_enabled(bool on);
// The device whose work the boundaries wait for (the cpu needs no wait).
void set_device(Device d);

class Section {
 public:
  explicit Section(const char* name);
  Section(const std::string& name);  // NOLINT: a name built once by its owner
  ~Section();
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;

 private:
  bool active_;
};

struct Row {
  std::string name;
  double seconds = 0;  // exclusive
  int64_t calls = 0;
};

// The rows so far, in first-seen order, and a reset (sections still open keep running).
std::vector<Row> rows();
void reset();

// A table: section, calls, ms per step, share of `step_seconds` (the steps' wall time), with a
// final row for the wall time outside every section.
std::string format_table(const std::vector<Row>& rows, int64_t steps, double step_seconds);

}  // namespace amor::profile
