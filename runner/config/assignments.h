// Reading run-config mappings into typed key assignments, and resolving assignments into a
// RunConfig (defaults, then each assignment in order, then derived values and cross-key checks).
//
// A run-config mapping nests sections and dotted keys freely: these all set model.amor.kappa:
//   model: {amor: {kappa: 0.3}}     model: {amor.kappa: 0.3}     model.amor.kappa: 0.3
#pragma once
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runner/config/config_error.h"
#include "runner/config/run_config.h"
#include "runner/config/schema.h"

namespace amor::config {

// One key set to one value, and where that happened.
struct Assignment {
  const Field* field = nullptr;
  FieldValue value;
  Location where;
};

// Calls `leaf` for every key of `map` below `prefix` that names a schema key, recursing into
// sections. Unknown keys, non-string keys and sections given a non-mapping are ConfigErrors
// naming `file`, the line and the full dotted key; `context` starts each message ("sweep.grid: ").
using LeafFn = std::function<void(const Field&, const YAML::Node& value, const Location& key_at)>;
void walk_config(const YAML::Node& map, const std::string& prefix, const std::string& file,
                 const std::string& context, const LeafFn& leaf);

// The line of a value node, falling back to its key's line (yaml-cpp places empty values on the
// next token's line).
Location value_location(const YAML::Node& value, const Location& key_at);

// Reads a run-config mapping into typed assignments in file order; a key set twice in the same
// mapping is an error.
std::vector<Assignment> read_config_map(const YAML::Node& map, const std::string& file,
                                        const std::string& context = "");

// Where each key was last set: used to place errors found after all keys are known.
using KeyLocations = std::map<std::string, Location>;

// Applies assignments in order onto `config` and records where each key was set.
void apply(RunConfig& config, const std::vector<Assignment>& assignments, KeyLocations& set_at);

// Derives values that depend on others (train.dtype auto -> f32 on cpu, bf16 on cuda) and checks
// rules between keys (dtype vs device, serial needs a pattern, shards need a path, min <= max).
// An error is placed where the offending key was set, or at `fallback` for a default.
void finalize(RunConfig& config, const KeyLocations& set_at, const Location& fallback);

// A corpus or shards run's model.vocab must hold the tokenizer's ids (byte 259, gpt2 50257,
// llama3 128256). Checked when a sweep expands (not when a written config.json is read back).
void check_tokenizer_vocab(const RunConfig& config, const KeyLocations& set_at,
                           const Location& fallback);

}  // namespace amor::config
