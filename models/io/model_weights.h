// A model's weights as one safetensors file, named as the model names its parameters (the names
// and shapes per model kind are in models/README.md), so that a model can be compared with, or
// moved to and from, PyTorch (tests/torch_ref loads these files).
//
// The file's __metadata__ records what the weights belong to:
//   format            "amor-run model weights"
//   model_config      the ModelConfig as JSON (models/core/config_json.h)
//   amor_run_version  the writer's version
//   parameters        the total parameter count, as a decimal string
// Tensors are written in ParamStore order in the store's dtype (CPU copies of device tensors); the
// write is atomic (temp file + rename), so a crash never leaves a half-written weights file.
#pragma once
#include <map>
#include <string>

#include "models/core/config.h"
#include "models/core/param_store.h"
#include "models/lm/language_model.h"

namespace amor::model {

void save_model_weights(const std::string& path, const ParamStore& ps, const ModelConfig& cfg,
                        const std::string& amor_run_version);

// Loads every parameter of ps from the file, converting the file's floating dtype to the store's
// and copying to each parameter's device. Every name and shape is checked before anything is
// written: a missing tensor, an unexpected one, a wrong shape or a non-float tensor is an
// amor::Error naming the file, each offending tensor and both shapes, and ps is left unchanged.
// Returns the file's metadata.
std::map<std::string, std::string> load_model_weights(const std::string& path, ParamStore& ps);

// The same into a model, and then its state beyond the parameters from the file's metadata where
// the file has it (AMOR's gates: "amor_gates", written by `amor-run convert-weights --from authors`;
// restore_checkpoint_state, not required: training's weights files carry no gate state).
std::map<std::string, std::string> load_model_weights(const std::string& path, LanguageModel& model);

}  // namespace amor::model
