// What the runner's config checks and sweep summary need to know about a model kind before (or
// without) building a model (issue #17 §2): runner/ asks these instead of naming kinds, so a new
// kind is described here, next to build_model, and runner/ stays as it is.
#pragma once
#include <string>
#include <vector>

#include "models/lm/run_contract.h"

namespace amor::model {

struct KindTraits {
  // model.pattern must be set (serial: the layer letters it repeats).
  bool needs_pattern = false;
  // Batch::modes steers the model and StepOutput reports its mixer per token (Oryx); what the
  // oryx_switch evaluation task needs.
  bool takes_modes = false;
  // LanguageModel::summary_metrics's default for this kind; the sweep summary and index.csv show
  // these for the kind's runs (they read the kind's list, since they build no model).
  std::vector<SummaryMetric> summary_metrics;
};

// The traits of model.kind `kind` (an unknown kind: the defaults; the schema rejects it anyway).
const KindTraits& kind_traits(const std::string& kind);
// Every kind the schema accepts, in its order.
const std::vector<std::string>& model_kinds();
// The kinds with a trait set, joined by " or " (for messages: "needs model.kind oryx").
std::string kinds_with(bool KindTraits::*trait);

}  // namespace amor::model
