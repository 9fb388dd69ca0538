// model.preset in a run config: the preset fills model.kind, vocab, d_model, n_layers and d_ff
// (and, for some, the AMOR authors' norm epsilons and init: models/presets/presets.h), except
// those the sweep (base, grid, zip or an override) set explicitly, which win.
#pragma once
#include "runner/config/assignments.h"
#include "runner/config/run_config.h"
#include "runner/config/sweep.h"

namespace amor {

void apply_model_preset(config::RunConfig& cfg, const config::KeyLocations& set_at);

// Checks, before anything is created, that the run's model can be built and can fit: its sizes
// are in range, its shapes are what the model constructors accept (heads that divide the width,
// ...; count_parameters makes the constructors' checks), its parameter count is at most 1e12 and
// estimate_bytes_per_rank at most 1 TiB. Throws ConfigError "file:line: key 'k': run '...': why"
// naming where the key that is wrong (or the likely culprit) was set.
void check_model_shapes(const config::RunSpec& spec);

// A rough, low memory estimate of one rank of the run: f32 parameters, gradients and Adam moments
// (sharded over parallel.ranks_per_run) plus the activations backward keeps at least (recompute);
// printed by --dry-run and used to refuse runs that clearly cannot fit.
double estimate_bytes_per_rank(const config::RunConfig& cfg, int64_t params);

}  // namespace amor
