// The eval.* rules between keys (runner/config/README.md "Evaluation"): known task names (an
// unknown one is refused with the known list), what each named task needs (a file task its path,
// oryx_switch an Oryx model), and the two ways to evaluate existing weights (eval.weights,
// eval.checkpoint with train.steps 0). amor-run applies them when it resolves each run
// (ExpandOptions::resolve), so a written config.json reads back without them.
#pragma once
#include "runner/config/assignments.h"
#include "runner/config/run_config.h"

namespace amor::config {

// Errors name where the offending key was set (or `fallback` for a default), and the key.
void check_eval_config(const RunConfig& c, const KeyLocations& set_at, const Location& fallback);

}  // namespace amor::config
