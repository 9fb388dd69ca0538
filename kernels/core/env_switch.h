// The one reader of the kernels' environment switches (AMOR_GDN_VARIANT=tile, AMOR_GDN_WY=tile,
// AMOR_GDN_SBWD_WARPS=8, ...): a switch left unset or empty takes its default, one set to a value
// it lists takes that value, and anything else is refused with an amor::Error that names the
// variable, the value and what it accepts. A misspelt value (AMOR_GDN_WY=tiel) would otherwise
// time or test the default while the researcher believes it measured the alternative.
//
// Plain C++ (no fmt, no CUDA): .cu host code includes it through nvcc. The callers read each
// switch once (a function-local static), so a refused value throws at the first launch that
// consults it, and again at the next (a static whose initialiser throws is not initialised).
//
// Retired switches (kernels/README.md, "Retired"): a switch whose kernel was removed would
// otherwise be ignored without a word, and an A/B run that sets it would time the default twice.
// The first env_choice or env_int of the process refuses while one of them is set (non-empty),
// naming it, when it was retired and what took its place; env_choice and env_int are read by
// every run (profile.cpp's AMOR_PROFILE at the first forward), so no run gets past its first step
// with one set. The check runs once per process and, like the switches, again at every read for
// as long as it refuses.
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

// Throws an amor::Error naming every retired switch that is set (non-empty) in the environment,
// e.g. "AMOR_SSD_BWD is 'tile', but that switch was retired on 2026-12-02 (session 7): ...;
// unset it"; returns when none is. env_choice and env_int call it (once per process, see above).
void refuse_retired_switches();

}  // namespace amor
