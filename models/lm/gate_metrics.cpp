// LanguageModel's default run contract (run_contract.h): the entropy-gate metrics. A model
// without gates reports NaN rates and thresholds and empty per-row vectors, so every run.h5 has
// the same /train columns (design §6).
#include <cmath>
#include <limits>

#include "models/lm/language_model.h"
#include "models/lm/model_kinds.h"

namespace amor::model {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Fired gate decisions per row and the tokens each row decided, summed over micro-batches, then
// over the run group; the thresholds of the last micro-batch (what the step ended with).
class GateMetrics final : public StepMetrics {
 public:
  void add(const StepOutput& out) override {
    if (fired_.size() < out.gates.size()) fired_.resize(out.gates.size(), 0.0);
    for (size_t k = 0; k < out.gates.size(); ++k) {
      const Tensor g = out.gates[k].is_cpu() ? out.gates[k] : out.gates[k].to(Device::CPU);
      const uint8_t* p = g.data<uint8_t>();
      for (int64_t i = 0; i < g.numel(); ++i) fired_[k] += p[i];
    }
    if (!out.gates.empty()) tokens_ += static_cast<double>(out.gates[0].numel());
    tau_ = out.tau;
  }

  MetricRow finish(RunGroup& group) override {
    double fire_rate = kNaN;
    std::vector<double> block_fire;
    // Counts are whole numbers, exact in double: the sums do not depend on the reduction order.
    if (!fired_.empty()) {
      std::vector<double> counts = fired_;
      counts.push_back(tokens_);
      group.sum(counts);
      double total = 0;
      for (size_t k = 0; k + 1 < counts.size(); ++k) {
        block_fire.push_back(counts[k] / counts.back());
        total += counts[k];
      }
      fire_rate = total / (counts.back() * static_cast<double>(block_fire.size()));
    }
    return {{"fire_rate", {fire_rate}},
            {"tau", {tau_.empty() ? kNaN : tau_.back()}},  // one threshold to plot: the last row's
            {"block_fire_rate", block_fire},
            {"block_tau", tau_}};
  }

 private:
  std::vector<double> fired_;
  double tokens_ = 0;
  std::vector<double> tau_;
};

}  // namespace

std::vector<MetricColumn> LanguageModel::metric_columns() const {
  const int64_t K = token_gate_rows();
  return {{"fire_rate", {}}, {"tau", {}}, {"block_fire_rate", {K}}, {"block_tau", {K}}};
}

std::vector<TokenColumn> LanguageModel::token_columns() const {
  return {{"mode", "", 1}, {"gate", "amor_blocks", token_gate_rows()}};
}

std::vector<Tensor> LanguageModel::token_rows(const StepOutput& out) const {
  std::vector<Tensor> rows = {out.modes};
  rows.insert(rows.end(), out.gates.begin(), out.gates.end());
  return rows;
}

std::unique_ptr<StepMetrics> LanguageModel::new_step_metrics() const { return std::make_unique<GateMetrics>(); }

std::vector<SummaryMetric> LanguageModel::summary_metrics() const { return kind_traits(cfg_.kind).summary_metrics; }

}  // namespace amor::model
