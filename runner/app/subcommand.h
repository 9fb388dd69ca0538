// The amor-run subcommands that run in one process without MPI (convert-weights, fit-router,
// bench-decode) share their outcome rules: `--help` prints the usage on out and exits 0, a usage
// error (UsageError) prints "amor-run NAME: why" and the usage on err and exits 2, any other
// failure prints "amor-run NAME: why" on err and exits 1; else the body's status.
#pragma once
#include <exception>
#include <ostream>
#include <string>

#include "kernels/core/error.h"

namespace amor {

// A bad command line; an empty message means --help.
struct UsageError : Error {
  using Error::Error;
};

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
