// The data of a run from its `data.*` config: the training and validation batch sources for one
// rank of its group, and the built-in corpus, prepared on first use.
#pragma once
#include <memory>
#include <string>

#include "data/synthetic/token_roles.h"
#include "runner/config/run_config.h"
#include "runner/train/batch_source.h"

namespace amor {

struct RunData {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> valid;  // stream order, no shuffle
  bool recall_task = false;            // targets only at answers (MQAR): score accuracy
  synthetic::RoleRule roles;           // the validation sequences' token roles (MQAR); empty: none
};

// rank/world: this rank in the run's group. Data-dependent errors name the config key.
RunData make_run_data(const config::RunConfig& cfg, int rank, int world);

// The built-in corpus (King James Bible, Debian's bible-kjv-text) as shards for a tokenizer,
// prepared once into $AMOR_CACHE/corpus/kjv-<tokenizer> (default $HOME/.cache/amor-run): the
// folder appears complete or not at all (built in a temporary folder, then renamed).
std::string builtin_corpus_dir(const std::string& tokenizer);

}  // namespace amor
