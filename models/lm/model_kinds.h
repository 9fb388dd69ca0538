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
  // The kind-specific model keys this kind reads, as prefixes relative to `model.` ("pattern",
  // "amor." for every key under model.amor). A key under a prefix that some kind lists but this
  // one does not is ignored by this kind's models (kind_uses_key); keys no kind lists (d_model,
  // vocab ...) are read by every kind. Listed conservatively: mamba2.* and gdn.* for every kind
  // that may hold such a mixer (amor whatever its backbone), since run names drop only the keys a
  // kind never reads (runner/config/run_name.h).
  std::vector<std::string> key_prefixes;
  // Per-token entropy gates a fitted router can drive (LanguageModel::use_entropy_router; AMOR):
  // what eval.router needs.
  bool has_entropy_gates = false;
};

// The traits of model.kind `kind` (an unknown kind: the defaults; the schema rejects it anyway).
const KindTraits& kind_traits(const std::string& kind);
// Whether a model of kind `kind` reads the model key `key` (relative to `model.`, e.g.
// "amor.backbone", "pattern"): false only for a key under another kind's key_prefixes.
bool kind_uses_key(const std::string& kind, const std::string& key);

// Every kind the schema accepts, in its order.
const std::vector<std::string>& model_kinds();
// The kinds with a trait set, joined by " or " (for messages: "needs model.kind oryx").
std::string kinds_with(bool KindTraits::*trait);

}  // namespace amor::model
