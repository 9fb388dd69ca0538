// How a config struct declares its keys: once each, right below the struct (issue #17 §1).
//
// Every config struct (ModelConfig and its sections in models/core/config.h, the run's sections
// in runner/config/run_config.h) is followed by one function that lists its members:
//
//   template <class V> void declare_keys(std::type_identity<Mamba2Config>, V& v) {
//     v.key("d_state", &Mamba2Config::d_state, at_least(1), "N: the state size of each head");
//     ...
//   }
//
// A line gives the key's name within its section, the member (its C++ type is the key's type,
// its initialiser the key's default), the values it may take beyond its type, and a one-line
// doc. `v.section("mamba2", &ModelConfig::mamba2)` places a member struct's own listing under a
// name. Whatever needs key names walks these listings instead of naming keys again: the run
// config schema with its typed parsing and file:line:key errors (runner/config/schema.cpp), and
// through it the YAML/JSON-to-struct conversion and the canonical JSON that identifies a run; the
// model JSON written beside weights (models/core/config_json.cpp); the key table of
// runner/config/README.md (runner/config/key_table.cpp, compared with the README by a test).
//
// A visitor rather than a data table because the members have different types: a template
// visitor receives each member pointer with its own type, so the listings need no type erasure.
#pragma once
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace amor::keys {

// The values a key may take beyond its C++ type. Plain data, so that the schema can check it,
// say what was expected, and the README table can describe it.
struct Allowed {
  // Numbers, and every item of a number list, lie in lo..hi; an end is excluded where *_open.
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  // "a|b|c": a string key is one of these (an enum; "" may be one: "SIGUSR1|SIGUSR2|"), an
  // integer key one of these numbers ("1|3").
  std::string_view one_of;
  // A string key is made only of these characters ("AMG").
  std::string_view letters;
  // A string key with a format of its own: `text_problem` says what is wrong with a value ("" if
  // nothing); `text_values` describes the accepted values for the README table.
  std::string (*text_problem)(const std::string&) = nullptr;
  std::string_view text_values;
  // Not a value rule but the key's part in run identity: see omitted_at_default below.
  bool omit_at_default = false;
};

constexpr Allowed anything() { return {}; }
// Integers and numbers >= lo.
constexpr Allowed at_least(double lo) {
  Allowed a;
  a.lo = lo;
  return a;
}
// The largest size a model or batch dimension may have (2^40) and the most layers (2^20): beyond
// them no model can run, and bounding every size keeps every product of three of them inside the
// 128-bit count_parameters works in (models/presets/param_count.cpp).
constexpr double kMaxSize = 1099511627776.0, kMaxLayers = 1048576.0;
// A size that multiplies into parameter or activation counts: lo..2^40.
constexpr Allowed size_from(double lo) {
  Allowed a;
  a.lo = lo;
  a.hi = kMaxSize;
  return a;
}

// Numbers > 0.
constexpr Allowed positive() {
  Allowed a;
  a.lo = 0;
  a.lo_open = true;
  return a;
}
// Numbers in [lo, hi].
constexpr Allowed in_range(double lo, double hi) {
  Allowed a;
  a.lo = lo;
  a.hi = hi;
  return a;
}
// Numbers in [lo, hi).
constexpr Allowed below(double lo, double hi) {
  Allowed a = in_range(lo, hi);
  a.hi_open = true;
  return a;
}
constexpr Allowed one_of(std::string_view choices) {
  Allowed a;
  a.one_of = choices;
  return a;
}
constexpr Allowed letters(std::string_view chars) {
  Allowed a;
  a.letters = chars;
  return a;
}

// A string checked by its owner's own parser (the one the model uses), described as `values`.
constexpr Allowed text(std::string_view values, std::string (*problem)(const std::string&)) {
  Allowed a;
  a.text_values = values;
  a.text_problem = problem;
  return a;
}

// A key added after run identities were pinned (runner/app/experiment_hashes_test.cpp): the
// canonical config leaves it out while it holds its default, so that runs which do not use it keep
// their hash (and their results folder). E.g. omitted_at_default(positive()).
constexpr Allowed omitted_at_default(Allowed a) {
  a.omit_at_default = true;
  return a;
}

// The choices of a one_of: "SIGUSR1|SIGUSR2|" -> {"SIGUSR1", "SIGUSR2", ""}; "" -> {}.
inline std::vector<std::string> choice_list(std::string_view one_of) {
  std::vector<std::string> out;
  for (size_t start = 0; !one_of.empty();) {
    const size_t bar = one_of.find('|', start);
    out.emplace_back(one_of.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return out;
}

// Calls declare_keys for struct S (found by argument-dependent lookup in S's namespace).
template <class S, class V>
void visit_keys(V& v) {
  declare_keys(std::type_identity<S>{}, v);
}

}  // namespace amor::keys
