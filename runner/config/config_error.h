// The error every config problem raises, and where in which file it was found.
//
// ConfigError derives from amor::Error so generic handlers still catch it; the CLI catches it
// first and exits with status 2 before anything is created. Messages read
//   "experiments/a.yaml:12: key 'train.lr': expected a number, got 'fast'".
#pragma once
#include <string>

#include "kernels/core/error.h"

namespace amor::config {

class ConfigError : public amor::Error {
 public:
  explicit ConfigError(const std::string& what) : amor::Error(what) {}
};

// A place in a config source: a file (as the user named it) and a 1-based line; line 0 = the
// whole source (a missing file, an empty document). Command-line overrides use the source
// "override 'key=value'".
struct Location {
  std::string file;
  int line = 0;

  std::string str() const { return line > 0 ? file + ":" + std::to_string(line) : file; }
};

[[noreturn]] inline void fail(const Location& where, const std::string& what) {
  throw ConfigError(where.str() + ": " + what);
}

}  // namespace amor::config
