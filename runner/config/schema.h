// The run-config schema: every dotted key of RunConfig with its type, allowed values and range,
// and the typing of YAML values against it. The table is built from the declare_keys listings
// beside the config structs (run_config.h, models/core/config.h), which are the one place that
// names keys; parsing, validation, canonical serialisation, run names and the README's key table
// all use this table.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runner/config/config_error.h"
#include "runner/config/run_config.h"

namespace amor::config {

// A typed value of one key. Integers and floats stay distinct so `d_model: 64.5` is an error.
using FieldValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>,
                                std::vector<int64_t>, std::vector<double>>;

enum class FieldType { Bool, Int, Float, String, Enum, StringList, IntList, FloatList };

struct Field {
  std::string key;                   // dotted: "model.amor.kappa"
  FieldType type = FieldType::String;
  std::vector<std::string> choices;  // Enum only, in documentation order
  std::function<FieldValue(const RunConfig&)> get;
  std::function<void(RunConfig&, const FieldValue&)> set;
  keys::Allowed allowed;             // ranges, integer choices, letters (as declared)
  std::string doc;                   // the declared one-line doc ("" if none)
  size_t order = 0;                  // position in the declare_keys listings (README table order)
};

// Every key, sorted by dotted name.
const std::vector<Field>& fields();
// The problem with an already typed value of `field` ("must be at least 1, got 0"), or "".
std::string value_problem(const Field& field, const FieldValue& value);
// A range bound as people write it: 0, 1, 0.5, 1e-05, and 2^40 for powers of two from 2^20.
std::string format_limit(double x);
const Field* find_field(std::string_view key);
// True for a proper prefix of keys ("model", "model.amor", "data.mqar"): a mapping goes there.
bool is_section(std::string_view key);
// The closest known key or section to a misspelt one, or "" if none is close.
std::string suggest_key(std::string_view key, const std::vector<std::string>& candidates);
std::string suggest_config_key(std::string_view key);

// Types a YAML value for `field`. Errors read "<where>: <context>key '<key>': <problem>".
// Integers: decimal literals (also exponent forms that are exact integers, "1e4"); numbers:
// YAML 1.2 float or integer literals (no inf/nan); booleans: true/false; strings: any scalar but
// null; enums: one of the choices; string lists: a list of such scalars. Quoted scalars are
// strings, never numbers or booleans. Integer and number lists: lists of such literals.
FieldValue parse_value(const Field& field, const YAML::Node& node, const Location& where,
                       const std::string& context = "");

// The canonical text of a value, as written into run names, --dry-run listings and YAML:
// 768, 0.001, 1e-08, 10000.0, true, amor, [lambada, piqa], [256, 512], [0.0, 50.0]. Floats are written as Python's repr
// writes them: the shortest text that reads back to the same double, always with '.' or 'e' so
// they stay floats.
std::string format_value(const FieldValue& v);
std::string format_double(double d);
// The same value as JSON (strings quoted).
std::string json_value(const FieldValue& v);
// How a YAML node looks in a message: 'fast', "64" (quoted), a list, a mapping, nothing.
std::string describe_node(const YAML::Node& node);

}  // namespace amor::config
