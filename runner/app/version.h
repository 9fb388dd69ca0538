// amor-run's version and the git commit it was built from (recorded in every run.h5).
#pragma once
#include <string>

namespace amor {
std::string version();     // "0.1.0"
std::string git_commit();  // full hash, "+dirty" appended for a modified tree; "unknown" outside git
}  // namespace amor
