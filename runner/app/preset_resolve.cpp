#include "runner/app/preset_resolve.h"

#include "models/presets/presets.h"
#include "runner/config/config_error.h"

namespace amor {

void apply_model_preset(config::RunConfig& cfg, const config::KeyLocations& set_at) {
  if (cfg.model.preset.empty()) return;
  model::ModelConfig p;
  try {
    p = model::apply_preset(cfg.model, cfg.model.preset);
  } catch (const Error& e) {
    auto it = set_at.find("model.preset");
    throw config::ConfigError(it != set_at.end() ? it->second.str() + ": " + e.what() : e.what());
  }
  auto keep = [&](const char* key, auto& dst, const auto& preset_value) {
    if (!set_at.count(key)) dst = preset_value;
  };
  keep("model.kind", cfg.model.kind, p.kind);
  keep("model.vocab", cfg.model.vocab, p.vocab);
  keep("model.d_model", cfg.model.d_model, p.d_model);
  keep("model.n_layers", cfg.model.n_layers, p.n_layers);
  keep("model.d_ff", cfg.model.d_ff, p.d_ff);
}

}  // namespace amor
