// The one exception type of amor-run, and the check macro every op uses on its inputs.
//
// Messages are for the researcher who passed the wrong thing: they name the op (or file and key)
// and the shapes involved, e.g. "rmsnorm_forward: w has shape [63], expected [64] (x is f32[8,64]@cpu)".
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace amor {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A device allocation the device could not satisfy (its message says "out of memory", the bytes
// asked and what the device had free). The caching allocator gives its cached blocks back and
// retries once before letting it through, so callers that can shrink their work (bench-decode's
// larger contexts) catch this type rather than matching messages.
class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& what) : Error(what) {}
};

}  // namespace amor

#define AMOR_CHECK(cond, ...)                                  \
  do {                                                         \
    if (!(cond)) throw ::amor::Error(fmt::format(__VA_ARGS__)); \
  } while (0)
