// ModelConfig as JSON: written beside weights (and read by the PyTorch reference models). Every
// key of the model's declare_keys listings (models/core/config.h), in their order.
#pragma once
#include "data/json/json.h"
#include "models/core/config.h"

namespace amor::model {

json::Value to_json(const ModelConfig& c);

}  // namespace amor::model
