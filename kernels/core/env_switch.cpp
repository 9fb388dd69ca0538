#include "kernels/core/env_switch.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernels/core/error.h"

namespace amor {

std::string env_choice(const char* name, std::initializer_list<const char*> allowed,
                       const char* fallback) {
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
