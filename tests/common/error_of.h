// The message of the amor::Error a callable throws, for tests that check error texts.
#pragma once
#include <functional>
#include <string>

#include "kernels/core/error.h"

namespace amor::testing {

// f's amor::Error message, or "(no error)" when it returns normally.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace amor::testing
