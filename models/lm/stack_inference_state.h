// The inference state of a stack model (StackModel; lm/language_model.h): one mixer cache per layer.
#pragma once
#include <memory>
#include <vector>

#include "models/core/mixer.h"
#include "models/lm/language_model.h"

namespace amor::model {

struct StackInferenceState final : InferenceState {
  std::vector<std::unique_ptr<MixerCache>> layers;
};

}  // namespace amor::model
