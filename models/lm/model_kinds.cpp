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
      {"transformer", {false, false, kGateSummary}}, {"mamba2", {false, false, kGateSummary}},
      {"gdn", {false, false, kGateSummary}},         {"serial", {true, false, kGateSummary}},
      {"fused", {false, false, kGateSummary}},       {"amor", {false, false, kGateSummary}},
      {"oryx", {false, true, kGateSummary}}};
  return t;
}

}  // namespace

const KindTraits& kind_traits(const std::string& kind) {
  static const KindTraits unknown{false, false, kGateSummary};
  for (const auto& [name, traits] : table())
    if (name == kind) return traits;
  return unknown;
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
