// The validation pass of a run (run.h5 /eval/valid, /tokens/valid, the summary's valid loss):
// the sharded model on the validation set, sequences dealt over the run's ranks, the mean loss
// over all valid tokens, MQAR-style recall where targets mark answers only, and the model's
// summary metrics (LanguageModel::summary_metrics) over the whole pass.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data/synthetic/token_roles.h"
#include "models/lm/language_model.h"
#include "runner/dist/communicator.h"
#include "runner/dist/fsdp.h"
#include "runner/output/run_file.h"
#include "runner/train/batch_source.h"

namespace amor {

struct ValidResult {
  double loss = 0, tokens = 0;
  std::vector<std::pair<std::string, double>> summary;  // the model's summary metrics (name, value)
  double recall_correct = 0, recall_labelled = 0;
  std::vector<double> per_example_acc;
  TokenSequences sequences;  // rank 0's first sequences, for /tokens/valid
};

// The model's summary metrics out of its metric row, in declaration order, NaN where absent.
std::vector<std::pair<std::string, double>> summary_values(const model::LanguageModel& model,
                                                           const model::MetricRow& row);

// Collective over comm. Rewinds `valid` to its start; max_examples > 0 caps the sequences.
// roles (may be empty) labels the recorded sequences' tokens (TokenSequences::role).
ValidResult evaluate_valid(dist::Fsdp& fsdp, const model::LanguageModel& model, BatchSource& valid,
                           bool recall, int64_t micro_batch, int64_t max_examples,
                           dist::Communicator& comm, Device dev, const synthetic::RoleRule& roles = {});

}  // namespace amor
