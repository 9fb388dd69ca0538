// model.preset in a run config: the preset fills model.kind, vocab, d_model, n_layers and d_ff,
// except those the sweep (base, grid, zip or an override) set explicitly, which win.
#pragma once
#include "runner/config/assignments.h"
#include "runner/config/run_config.h"

namespace amor {

void apply_model_preset(config::RunConfig& cfg, const config::KeyLocations& set_at);

}  // namespace amor
