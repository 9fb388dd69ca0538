// The amor-run subcommands that run in one process without MPI (convert-weights, fit-router,
// bench-decode) share their outcome rules: `--help` prints the usage on out and exits 0, a usage
// error (UsageError) prints "amor-run NAME: why" and the usage on err and exits 2, any other
// failure prints "amor-run NAME: why" on err and exits 1; else the body's status.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <ostream>
#include <string>

#include "kernels/core/error.h"

namespace amor {

// A bad command line; an empty message means --help.
struct UsageError : Error {
  using Error::Error;
};

// A whole command-line value as a number (std::nullopt when any of it is not part of one): the
// subcommands check ranges and word their own usage errors.
inline std::optional<int64_t> whole_integer(const std::string& text) {
  try {
    size_t used = 0;
    const long long x = std::stoll(text, &used);
    if (used == text.size()) return static_cast<int64_t>(x);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}
inline std::optional<double> whole_number(const std::string& text) {
  try {
    size_t used = 0;
    const double x = std::stod(text, &used);
    if (used == text.size()) return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

template <class F>
int run_subcommand(const char* name, const char* usage, std::ostream& out, std::ostream& err, F&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    if (!*e.what()) {
      out << usage;
      return 0;
    }
    err << "amor-run " << name << ": " << e.what() << "\n" << usage;
    return 2;
  } catch (const std::exception& e) {
    err << "amor-run " << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace amor
