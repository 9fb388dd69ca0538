// What the runner needs from a model besides forward/backward (design §5, "The runner and the
// models"): the runner (runner/) knows no model kind by name; it asks the model, through
// LanguageModel's virtual members below, for
//   - its per-step metrics: the /train columns of run.h5 it adds (names, shapes; float64), and
//     an accumulator that turns a step's micro-batch outputs into one row of them;
//   - its state that belongs in checkpoints beyond the parameters (AMOR's EMA thresholds), as
//     named strings stored in the checkpoint's metadata;
//   - the collectives it needs from the ranks that run it together (a RunGroup, which the
//     runner's sharding plugs in), and the run's seed for whatever it draws (Oryx's modes);
//   - its per-token records for run.h5's /tokens (names, rows) and a forward's values of them.
// A new model kind overrides these; nothing in runner/ changes. The defaults in LanguageModel
// describe the entropy-gate columns that every run.h5 carries (layout version 1: NaN and [n, 0]
// for a model without gates), filled from StepOutput::gates and ::tau.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::model {

struct StepOutput;

// The ranks that run one model together (the run group). Every member is collective: every rank
// calls it, in the same order, with matching arguments.
class RunGroup {
 public:
  virtual ~RunGroup() = default;
  virtual int size() const = 0;
  // Every rank's flat tensor (f32 or f64, any device), concatenated in rank order (ranks may hold
  // different counts), in local's dtype on local's device.
  virtual Tensor gather_flat(const Tensor& local) = 0;
  // Element-wise sum over the ranks, in place, the same on every rank.
  virtual void sum(std::vector<double>& values) = 0;
};

// One /train dataset of run.h5 that a model adds after the runner's own (step, tokens, loss, lr,
// grad_norm, tokens_per_s): float64, one row per logged step of `shape` ({}: a scalar per step,
// dataset [n]; {K}: dataset [n, K], K may be 0).
struct MetricColumn {
  std::string name;
  std::vector<int64_t> shape;
};

// One logged step's values of a model's metric columns, by name (each value holds the column's
// shape's element count; a column left out is written as NaN).
using MetricRow = std::map<std::string, std::vector<double>>;

// Accumulates a model's metrics over the micro-batches of one training step, or over one
// evaluation pass. add() takes each forward's output (any device: it copies what it reads);
// finish() is collective over the run group and gives the row.
class StepMetrics {
 public:
  virtual ~StepMetrics() = default;
  virtual void add(const StepOutput& out) = 0;
  virtual MetricRow finish(RunGroup& group) = 0;
};

// A scalar that the model reports besides the loss: in the progress line ("label value"), as an
// evaluation metric of /eval/valid, and in the run's final metrics (the sweep summary).
struct SummaryMetric {
  std::string name;    // the key in MetricRow (a scalar column) and the metric's name
  std::string label;   // in the progress line
};

// A per-token uint8 record that a model adds to every /tokens/<set> of run.h5 besides the
// runner's token_ids, entropy and loss. rows_attr "": one value per token, dataset [total];
// otherwise `rows` values per token (0 allowed), dataset [rows, total], and the root attribute
// rows_attr (int64) holds rows.
struct TokenColumn {
  std::string name;
  std::string rows_attr;
  int64_t rows = 1;
};

// The rows of these columns together: what LanguageModel::token_rows gives, in order.
inline int64_t token_row_count(const std::vector<TokenColumn>& columns) {
  int64_t n = 0;
  for (const auto& c : columns) n += c.rows_attr.empty() ? 1 : c.rows;
  return n;
}

}  // namespace amor::model
