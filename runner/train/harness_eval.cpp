#include "runner/train/harness_eval.h"

#include <algorithm>

#include "kernels/cast/cast.h"
#include "kernels/core/error.h"
#include "runner/eval/run_config_tasks.h"
#include "runner/train/checkpoints.h"

namespace amor {

namespace fs = std::filesystem;

HarnessTasks harness_tasks_for(const config::RunConfig& cfg) {
  HarnessTasks h;
  const std::vector<std::string> tasks = eval::harness_tasks(cfg);
  if (!tasks.empty()) h.tokenizer = make_tokenizer(cfg.data.tokenizer);
  for (const auto& t : tasks) {
    h.specs.push_back(eval::task_spec(cfg, t));
    // mqar's default vocabulary (model.vocab) stops at the tokenizer's ids.
    if (t == "mqar" && cfg.eval.mqar.vocab_size == 0)
      h.specs.back().mqar_vocab_size = std::min(h.specs.back().mqar_vocab_size, h.tokenizer->vocab_size());
  }
  return h;
}

std::unique_ptr<model::LanguageModel> eval_replica(const config::RunConfig& cfg, dist::Fsdp& fsdp,
                                                   const model::LanguageModel& trained, DType dtype, Device dev,
                                                   const ModelBuilder& build) {
  auto full = fsdp.full_parameters();
  auto replica = build ? build(cfg.model, dtype) : model::build_model(cfg.model, dtype);
  const auto& params = replica->params().params();
  AMOR_CHECK(params.size() == full.size(), "eval: the replica has {} parameters, the run {}",
             params.size(), full.size());
  for (size_t i = 0; i < params.size(); ++i) {
    AMOR_CHECK(params[i]->name == full[i].first, "eval: replica parameter {} is '{}', the run's '{}'",
               i, params[i]->name, full[i].first);
    // In the replica's dtype (eval.dtype), rounded as the training's gathers round the masters;
    // cast() hands back the tensor itself when it already is.
    params[i]->value = cast(full[i].second.to(dev), dtype);
    ++params[i]->version;
  }
  replica->restore_checkpoint_state(trained.checkpoint_state(), /*required=*/true);
  if (!cfg.eval.router.empty()) replica->use_entropy_router(cfg.eval.router);  // AMOR's fitted router
  return replica;
}

fs::path eval_checkpoint_dir(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "fsdp.json")) return p;
  if (fs::is_directory(p / "checkpoints"))
    if (auto latest = Checkpoints(p / "checkpoints", 1).latest()) return *latest;
  throw Error(fmt::format("eval.checkpoint: '{}' is neither a checkpoint folder (with fsdp.json) nor a "
                          "run folder with a complete checkpoint under checkpoints/", path));
}

}  // namespace amor
