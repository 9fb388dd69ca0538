// What the evaluation harness (runner/eval) needs from a run: its tasks resolved from eval.* with
// the tokenizer the data uses, an unsharded replica of the trained model to run them on, and
// eval.checkpoint's folder.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "models/lm/language_model.h"
#include "runner/config/run_config.h"
#include "runner/dist/fsdp.h"
#include "runner/eval/eval_tasks.h"

namespace amor {

// How a run builds its model (TrainerOptions::build_model): model::build_model unless set.
using ModelBuilder = std::function<std::unique_ptr<model::LanguageModel>(const model::ModelConfig&, DType)>;

struct HarnessTasks {
  std::vector<eval::TaskSpec> specs;    // eval.tasks, in order
  std::unique_ptr<Tokenizer> tokenizer;  // data.tokenizer's; null without tasks
};

HarnessTasks harness_tasks_for(const config::RunConfig& cfg);

// An unsharded copy of the model for the evaluation harness (collective: every rank of the run
// gathers every unit), with the model's state beyond its parameters (AMOR's frozen thresholds).
// On `dev`, in `dtype` (eval.dtype: the master dtype, or the compute dtype: the masters rounded
// as the training's gathers round them); built by `build` (model::build_model if empty).
std::unique_ptr<model::LanguageModel> eval_replica(const config::RunConfig& cfg, dist::Fsdp& fsdp,
                                                   const model::LanguageModel& trained, DType dtype, Device dev,
                                                   const ModelBuilder& build);

// eval.checkpoint: a checkpoint folder (holding fsdp.json) or a run folder (its newest checkpoint).
std::filesystem::path eval_checkpoint_dir(const std::string& path);

}  // namespace amor
