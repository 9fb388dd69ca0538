#include "kernels/core/env_switch.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernels/core/error.h"

namespace amor {

namespace {

// A switch that was removed with its kernel, and what a user who still sets it should know.
struct RetiredSwitch {
  const char* name;
  const char* when;     // the commit that removed it: git log -S'"NAME"'
  const char* instead;  // what runs now, and which switch (if any) still chooses near it
};

// Removed in e423819 ("Retire superseded scan kernels"), once their replacements had passed GPU
// parity and measured faster (tests/cuda/RESULTS.md sessions 4-6).
constexpr RetiredSwitch kRetired[] = {
    {"AMOR_GDN_SBWD", "2026-12-02 (session 7)",
     "the GDN state backward always runs gdn_state_bwd_wide_kernel (the 4-warp "
     "gdn_state_bwd_reg that 'reg' chose is gone); AMOR_GDN_SBWD_WARPS=N fixes its warps per "
     "block"},
    {"AMOR_GDN_QK_FINISH", "2026-12-02 (session 7)",
     "gdn_bwd_qk_reg always finishes from its warps' accumulators (the shared-memory finish that "
     "'smem' chose is gone); AMOR_GDN_QK=tile still selects the shared-memory gdn_bwd_qk"},
    {"AMOR_SSD_BWD", "2026-12-02 (session 7)",
     "SSD's span-path backward always runs dx_reg_kernel and the current dbc_heads_tc_kernel "
     "(the bf16-state dx_tc_kernel and earlier dbc_heads that 'tile' chose are gone); no switch "
     "replaces it"},
};

// refuse_retired_switches, once per process: a static whose initialiser throws is not
// initialised, so while a retired switch is set every read refuses again.
void refuse_retired_switches_once() {
  static const bool checked = (refuse_retired_switches(), true);
  (void)checked;
}

}  // namespace

void refuse_retired_switches() {
  std::string msg;
  for (const RetiredSwitch& r : kRetired) {
    const char* e = std::getenv(r.name);
    if (e == nullptr || *e == 0) continue;
    if (!msg.empty()) msg += "; ";
    msg += fmt::format("{} is '{}', but that switch was retired on {}: {}; unset it", r.name, e,
                       r.when, r.instead);
  }
  if (!msg.empty()) throw Error(msg);
}

std::string env_choice(const char* name, std::initializer_list<const char*> allowed,
                       const char* fallback) {
  refuse_retired_switches_once();
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return fallback;
  for (const char* a : allowed)
    if (std::strcmp(e, a) == 0) return e;
  std::string list;
  size_t i = 0;
  for (const char* a : allowed) {
    if (i > 0) list += i + 1 == allowed.size() ? " or " : ", ";
    list += a;
    ++i;
  }
  throw Error(fmt::format("{} is '{}'; it accepts {} (unset or empty: {})", name, e, list,
                          fallback));
}

int env_int(const char* name, int lo, int hi, int fallback) {
  refuse_retired_switches_once();
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return fallback;
  // strtol alone would take " 8", "8x" (as 8) and "x" (as 0); only an optional sign and digits
  // to the end are a number here.
  const char* p = *e == '-' || *e == '+' ? e + 1 : e;
  bool digits = *p != 0;
  for (; *p != 0; ++p) digits = digits && *p >= '0' && *p <= '9';
  errno = 0;
  const long v = digits ? std::strtol(e, nullptr, 10) : 0;
  AMOR_CHECK(digits && errno == 0 && v >= lo && v <= hi,
             "{} is '{}'; it accepts a whole number from {} to {} (unset or empty: {})", name, e,
             lo, hi, fallback);
  return int(v);
}

}  // namespace amor
