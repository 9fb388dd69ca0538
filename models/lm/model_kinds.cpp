#include "models/lm/model_kinds.h"

#include <utility>

namespace amor::model {

namespace {

// Every kind reports the entropy gates' fire rate (NaN, hence left out, without gates): the
// default /train columns every run.h5 carries (run_contract.h).
const std::vector<SummaryMetric> kGateSummary = {{"fire_rate", "fire"}};

// In the order of model.kind's one_of in models/core/config.h.
const std::vector<std::pair<std::string, KindTraits>>& table() {
  static const std::vector<std::pair<std::string, KindTraits>> t = {
      {"transformer", {false, false, kGateSummary, {}}},
      {"mamba2", {false, false, kGateSummary, {"mamba2."}}},
      {"gdn", {false, false, kGateSummary, {"gdn."}}},
      {"serial", {true, false, kGateSummary, {"pattern", "mamba2.", "gdn."}}},
      {"fused", {false, false, kGateSummary, {"fused_linear", "mamba2.", "gdn."}}},
      {"amor", {false, false, kGateSummary, {"amor.", "mamba2.", "gdn."}, true}},
      {"oryx", {false, true, kGateSummary, {"oryx.", "mamba2.", "gdn."}}}};
  return t;
}

}  // namespace

const KindTraits& kind_traits(const std::string& kind) {
  static const KindTraits unknown{false, false, kGateSummary, {}};
  for (const auto& [name, traits] : table())
    if (name == kind) return traits;
  return unknown;
}

namespace {

bool under(const std::string& key, const std::string& prefix) {
  if (prefix.empty()) return false;
  if (prefix.back() == '.') return key.compare(0, prefix.size(), prefix) == 0;
  return key == prefix;
}

}  // namespace

bool kind_uses_key(const std::string& kind, const std::string& key) {
  for (const auto& p : kind_traits(kind).key_prefixes)
    if (under(key, p)) return true;
  for (const auto& [name, traits] : table())
    for (const auto& p : traits.key_prefixes)
      if (under(key, p)) return false;  // another kind's key
  return true;
}

const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const auto& [name, traits] : table()) names.push_back(name);
    return names;
  }();
  return k;
}

std::string kinds_with(bool KindTraits::*trait) {
  std::string out;
  for (const auto& k : model_kinds())
    if (kind_traits(k).*trait) out += (out.empty() ? "" : " or ") + k;
  return out;
}

}  // namespace amor::model
