// The canonical text of a resolved RunConfig, its hash, and reading a written config back.
//
// The canonical form is JSON of the FULL config (defaults included, but see below), byte for byte
// what Python writes with `json.dumps(config, sort_keys=True, indent=2) + "\n"`: keys sorted at
// every level, two-space indent, one key or list item per line, floats as repr (shortest
// round-trip text), non-ASCII as \u escapes. The run's identity (hash8, the run directory's
// suffix) is the FNV-1a 64 hash of this text, so it is the same on every platform and across
// invocations, can be recomputed from a run's config.json in Python, and changes when any key's
// value changes.
// A key declared omitted_at_default (models/core/config_keys.h) is left out while it holds its
// default, so adding such a key keeps every existing hash; adding any other key changes them all.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "runner/config/run_config.h"

namespace amor::config {

std::string canonical_json(const RunConfig& config);
// The same content as block YAML (for run.h5's `config` attribute and for humans).
std::string canonical_yaml(const RunConfig& config);

uint64_t fnv1a64(std::string_view text);
// The first 8 hex digits (lower case) of fnv1a64(text), i.e. its top 32 bits.
std::string hash8(std::string_view text);

// Read a run config written by canonical_json / canonical_yaml (or any partial run-config mapping:
// defaults fill what is missing) and resolve it as a sweep would. `source` names it in errors.
RunConfig load_run_config_json(std::string_view text, const std::string& source = "<config>");
RunConfig load_run_config_yaml(std::string_view text, const std::string& source = "<config>");

}  // namespace amor::config
