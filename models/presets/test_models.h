// Test support for the preset, count and weights tests: build the model of any kind. Until
// build_model knows kind "fused" (the lead wires it as layer letter 'F'), a fused model is
// assembled here with the structure of every stack model (layers of FusedMixer, then norm_f);
// it holds the parameters only (forward throws). Once build_model builds fused models, they are
// used instead and this stand-in is no longer reached.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "models/core/norm_eps.h"
#include "models/lm/language_model.h"
#include "models/mixers/fused_mixer.h"
#include "tests/common/tiny_models.h"

namespace amor::model::testing_models {

class FusedStack final : public LanguageModel {
 public:
  FusedStack(const ModelConfig& cfg, DType dtype) : LanguageModel(cfg, dtype) {
    for (int64_t i = 0; i < cfg.n_layers; ++i) {
      std::string prefix = "layers." + std::to_string(i);
      params_.begin_unit(prefix);
      layers_.push_back(std::make_unique<Layer>(
          params_, prefix, cfg, std::make_unique<FusedMixer>(params_, prefix + ".mixer", cfg)));
    }
    params_.begin_unit("norm_f");
    norm_f_ = std::make_unique<RMSNorm>(params_, "norm_f", cfg.d_model, norm_eps_of(cfg).norm_f);
  }

 protected:
  Tensor body_forward(const Tensor&, const Batch&, bool, StepOutput&) override {
    throw Error("testing_models::FusedStack holds parameters only");
  }
  Tensor body_backward(const Tensor&) override {
    throw Error("testing_models::FusedStack holds parameters only");
  }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<RMSNorm> norm_f_;
};

inline std::unique_ptr<LanguageModel> build(const ModelConfig& cfg, DType dtype) {
  if (cfg.kind == "fused") {
    try {
      return build_model(cfg, dtype);
    } catch (const Error& e) {
      if (std::string(e.what()).find("unknown kind") == std::string::npos) throw;
      return std::make_unique<FusedStack>(cfg, dtype);
    }
  }
  return build_model(cfg, dtype);
}

// Tiny dims every kind accepts: d 16, attention heads of 4, Mamba2 heads of 4 with N 4, two GDN
// heads of K 4, a 2-layer stack with MLPs.
inline ModelConfig tiny(const std::string& kind) {
  return testing::tiny_model(kind, /*d_model=*/16, /*n_layers=*/2, /*vocab=*/13);
}

// Every kind with each variant that changes its parameter names: (label, config).
inline std::vector<std::pair<std::string, ModelConfig>> kinds_and_variants() {
  std::vector<std::pair<std::string, ModelConfig>> v;
  for (const char* k : {"transformer", "mamba2", "gdn"}) v.emplace_back(k, tiny(k));
  ModelConfig c = tiny("serial");
  c.pattern = "MGA";
  c.n_layers = 3;
  v.emplace_back("serial MGA", c);
  for (const char* lin : {"mamba2", "gdn"}) {
    c = tiny("fused");
    c.fused_linear = lin;
    v.emplace_back(std::string("fused ") + lin, c);
    c = tiny("oryx");
    c.oryx.linear = lin;
    v.emplace_back(std::string("oryx ") + lin, c);
    c = tiny("amor");
    c.amor.backbone = lin;
    v.emplace_back(std::string("amor ") + lin, c);
  }
  return v;
}

}  // namespace amor::model::testing_models
