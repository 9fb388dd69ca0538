#include "runner/train/valid_eval.h"

#include <cmath>

#include "data/synthetic/token_task.h"
#include "kernels/core/error.h"
#include "runner/dist/run_group.h"
#include "runner/train/step_tensors.h"

namespace amor {

namespace {
constexpr int64_t kTokenSequencesSaved = 16;  // per evaluation, so run.h5 stays small
}  // namespace

std::vector<std::pair<std::string, double>> summary_values(const model::LanguageModel& m,
                                                           const model::MetricRow& row) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& sm : m.summary_metrics()) {
    auto it = row.find(sm.name);
    out.emplace_back(sm.name, it == row.end() || it->second.empty() ? NAN : it->second[0]);
  }
  return out;
}

ValidResult evaluate_valid(dist::Fsdp& fsdp, const model::LanguageModel& model, BatchSource& valid,
                           bool recall, int64_t micro_batch, int64_t max_examples,
                           dist::Communicator& comm, Device dev, const synthetic::RoleRule& roles) {
  const std::vector<model::TokenColumn> columns = model.token_columns();
  ValidResult r;
  valid.set_position("0:0");
  const int64_t global_batch = micro_batch * comm.size();  // sequences are dealt over the ranks
  int64_t batches = valid.sequences() / global_batch;
  if (max_examples > 0) batches = std::min(batches, (max_examples + global_batch - 1) / global_batch);
  AMOR_CHECK(batches > 0, "data: the validation set ({} sequences) is smaller than one global "
             "micro-batch of {} sequences", valid.sequences(), global_batch);
  double loss_sum = 0, valid_tokens = 0;
  std::unique_ptr<model::StepMetrics> metrics = model.new_step_metrics();
  std::vector<std::vector<uint8_t>> rows(static_cast<size_t>(model::token_row_count(columns)));  // [row][t]
  for (int64_t b = 0; b < batches; ++b) {
    model::Batch batch = valid.next();
    const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
    model::StepOutput out = fsdp.forward(on_device(batch, dev), /*training=*/false);
    out.to_host();
    loss_sum += out.loss_sum;
    valid_tokens += static_cast<double>(out.n_valid);
    metrics->add(out);
    if (recall) {
      auto score = synthetic::score_tokens(out.predictions, batch.targets);
      r.recall_correct += static_cast<double>(score.correct);
      r.recall_labelled += static_cast<double>(score.labelled);
      r.per_example_acc.insert(r.per_example_acc.end(), score.per_example.begin(), score.per_example.end());
    }
    // The first sequences' per-token arrays go to run.h5 /tokens/valid (rank 0's, a sample).
    std::vector<Tensor> out_rows = model.token_rows(out);
    AMOR_CHECK(out_rows.size() == rows.size(), "model.token_rows: {} rows, its columns have {}", out_rows.size(),
               rows.size());
    for (Tensor& t : out_rows) t = host(t);
    for (int64_t i = 0; i < B && static_cast<int64_t>(r.sequences.lengths.size()) < kTokenSequencesSaved; ++i) {
      r.sequences.lengths.push_back(T);
      if (roles) {
        const std::span<const int32_t> x(batch.tokens.data<int32_t>() + i * T, static_cast<size_t>(T));
        const std::span<const int32_t> y(batch.targets.data<int32_t>() + i * T, static_cast<size_t>(T));
        std::vector<uint8_t> rr = roles(x, y);
        if (rr.empty()) rr.assign(static_cast<size_t>(T), 0);
        AMOR_CHECK(static_cast<int64_t>(rr.size()) == T, "valid: {} token roles for a sequence of {}", rr.size(), T);
        r.sequences.role.insert(r.sequences.role.end(), rr.begin(), rr.end());
      }
      for (int64_t t = 0; t < T; ++t) {
        const int64_t j = i * T + t;
        r.sequences.token_ids.push_back(batch.tokens.data<int32_t>()[j]);
        r.sequences.entropy.push_back(static_cast<float>(out.entropy.item(j)));
        // NaN where there is no target (design §6), not the 0 the loss tensor holds there.
        const bool scored = batch.targets.data<int32_t>()[j] != synthetic::kIgnore;
        r.sequences.loss.push_back(scored ? static_cast<float>(out.token_loss.item(j)) : NAN);
        for (size_t k = 0; k < rows.size(); ++k)
          rows[k].push_back(out_rows[k].defined() ? out_rows[k].data<uint8_t>()[j] : 0);
      }
    }
  }
  set_token_rows(r.sequences, columns, rows);
  double sums[4] = {loss_sum, valid_tokens, r.recall_correct, r.recall_labelled};
  comm.all_reduce(sums, 4, dist::ReduceOp::Sum);
  r.loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
  r.tokens = sums[1];
  r.recall_correct = sums[2];
  r.recall_labelled = sums[3];
  dist::CommRunGroup group(comm);
  r.summary = summary_values(model, metrics->finish(group));
  return r;
}

}  // namespace amor
