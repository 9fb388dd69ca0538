// The inference state of a stack model (StackModel; lm/language_model.h): one mixer cache per layer.
#pragma once
#include <memory>
#include <vector>

#include "kernels/core/error.h"
#include "models/core/mixer.h"
#include "models/lm/language_model.h"

namespace amor::model {

struct StackInferenceState final : InferenceState {
  std::vector<std::unique_ptr<MixerCache>> layers;

  void reserve_tokens(int64_t tokens) override {
    for (auto& l : layers) l->reserve_tokens(tokens);
  }
  void kv_caches(std::vector<KvCache*>& out) override {
    for (auto& l : layers) l->kv_caches(out);
  }

 protected:
  void append_body_rows(InferenceState& other) override {
    auto& o = static_cast<StackInferenceState&>(other);  // the same type: append_rows checked it
    AMOR_CHECK(o.layers.size() == layers.size(), "StackInferenceState: joining states of {} and {} layers",
               layers.size(), o.layers.size());
    for (size_t i = 0; i < layers.size(); ++i) layers[i]->append_rows(*o.layers[i]);
  }
};

}  // namespace amor::model
