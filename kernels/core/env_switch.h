// The one reader of the kernels' environment switches (AMOR_GDN_VARIANT=tile, AMOR_GDN_WY=tile,
// AMOR_GDN_SBWD_WARPS=8, ...): a switch left unset or empty takes its default, one set to a value
// it lists takes that value, and anything else is refused with an amor::Error that names the
// variable, the value and what it accepts. A misspelt value (AMOR_GDN_WY=tiel) would otherwise
// time or test the default while the researcher believes it measured the alternative.
//
// Plain C++ (no fmt, no CUDA): .cu host code includes it through nvcc. The callers read each
// switch once (a function-local static), so a refused value throws at the first launch that
// consults it, and again at the next (a static whose initialiser throws is not initialised).
#pragma once
#include <initializer_list>
#include <string>

namespace amor {

// The value of environment variable `name`: `fallback` when it is unset or empty, the value when
// it is one of `allowed`, else an amor::Error such as
//   "AMOR_GDN_WY is 'tiel'; it accepts tile or reg (unset or empty: reg)".
// `fallback` is what an unset switch means; list it in `allowed` too so that it can be named.
std::string env_choice(const char* name, std::initializer_list<const char*> allowed,
                       const char* fallback);

// The integer value of environment variable `name`: `fallback` when it is unset or empty (it need
// not lie in [lo, hi]: 0 often means "let the launcher choose"), the value when it is a whole
// decimal number in [lo, hi] (surrounding spaces are refused too), else an amor::Error that names
// the variable, the value and the range.
int env_int(const char* name, int lo, int hi, int fallback);

}  // namespace amor
