// How runner/app reads environment variables: through an EnvLookup, so that --shard and --threads
// can be tested with a made-up environment instead of the process's.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace amor {

// The value of a variable, nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment (getenv).
std::optional<std::string> process_env(const std::string& name);

// A fixed environment (tests).
inline EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace amor
