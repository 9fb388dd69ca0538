#include "runner/app/version.h"

namespace amor {
std::string version() { return AMOR_VERSION; }
std::string git_commit() { return AMOR_GIT_COMMIT; }
}  // namespace amor
