// The whole of a text file (a config, a sweep, a router's data config) as a string, for the
// amor-run subcommands that read one; an unreadable file is an amor::Error naming it.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/core/error.h"

namespace amor {

inline std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AMOR_CHECK(f, "cannot read '{}'", path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace amor
