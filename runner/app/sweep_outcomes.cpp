#include "runner/app/sweep_outcomes.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "runner/eval/eval_tasks.h"
#include "runner/eval/run_config_tasks.h"
#include "runner/output/sweep_index.h"
#include "runner/train/stop_signal.h"

namespace amor {

namespace {

double metric(const std::map<std::string, double>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? NAN : it->second;
}

std::string fmt_num(double v, const char* f = "{:.4f}") {
  return std::isnan(v) ? std::string("-") : fmt::format(fmt::runtime(f), v);
}

}  // namespace

std::vector<std::string> eval_columns(const config::RunConfig& cfg) {
  std::vector<std::string> cols;
  for (const auto& t : eval::harness_tasks(cfg))
    if (t != "mqar") cols.push_back(t + "_" + eval::headline_metric(t));
  return cols;
}

bool eval_column_applies(const config::RunConfig& cfg, const std::string& column) {
  // A model trained on MQAR's synthetic tokens has seen no text: the text tasks' scores (ppl by
  // position, NIAH, passkey, lambada ...) say nothing about it. MQAR's own score applies to all.
  return cfg.data.source != "mqar" || column.rfind("mqar_", 0) == 0;
}

bool recall_applies(const config::RunConfig& cfg) {
  return cfg.data.source == "mqar" ||
         std::find(cfg.eval.tasks.begin(), cfg.eval.tasks.end(), "mqar") != cfg.eval.tasks.end();
}

const std::vector<model::SummaryMetric>& model_summary(const config::RunConfig& cfg) {
  return model::kind_traits(cfg.model.kind).summary_metrics;
}

Outcome outcome_of(const config::RunSpec& spec, const RunResult& res) {
  Outcome out;
  out.final_loss = metric(res.metrics, "final_loss");
  out.valid_loss = metric(res.metrics, "valid_loss");
  out.mqar_acc = metric(res.metrics, "mqar_acc");
  for (const auto& sm : model_summary(spec.config)) out.model.push_back(metric(res.metrics, sm.name));
  for (const auto& c : eval_columns(spec.config)) out.evals.push_back(metric(res.metrics, c));
  out.message = res.message;
  out.status = res.status == TrainStatus::Done ? 1 : res.status == TrainStatus::Stopped ? 3 : 4;
  return out;
}

void collect_outcomes(const std::vector<config::RunSpec>& runs, std::vector<Outcome>& outcomes, int groups,
                      int ranks_per_run, int world_rank) {
  for (size_t i = 0; i < runs.size(); ++i) {
    const int owner = static_cast<int>(i % static_cast<size_t>(groups)) * ranks_per_run;
    const size_t ncol = eval_columns(runs[i].config).size();
    const size_t nmodel = model_summary(runs[i].config).size();
    outcomes[i].evals.resize(ncol, NAN);
    outcomes[i].model.resize(nmodel, NAN);
    std::vector<double> vals = {static_cast<double>(outcomes[i].status), outcomes[i].final_loss,
                                outcomes[i].valid_loss, outcomes[i].mqar_acc};
    vals.insert(vals.end(), outcomes[i].model.begin(), outcomes[i].model.end());
    vals.insert(vals.end(), outcomes[i].evals.begin(), outcomes[i].evals.end());
    const int n = static_cast<int>(vals.size());
    if (owner == 0) continue;
    if (world_rank == owner) MPI_Send(vals.data(), n, MPI_DOUBLE, 0, 1000 + static_cast<int>(i), MPI_COMM_WORLD);
    if (world_rank == 0) {
      MPI_Recv(vals.data(), n, MPI_DOUBLE, owner, 1000 + static_cast<int>(i), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const auto evals_at = vals.begin() + 4 + static_cast<std::ptrdiff_t>(nmodel);
      outcomes[i] = {static_cast<int>(vals[0]), vals[1], vals[2], vals[3], "",
                     std::vector<double>(evals_at, vals.end()), std::vector<double>(vals.begin() + 4, evals_at)};
    }
  }
}

int exit_status_of(const std::vector<int>& statuses) {
  bool stopped = false, failed = false;
  for (int s : statuses) {
    stopped = stopped || s == 3 || s == 0;  // 0: never started, the job was stopped first
    failed = failed || s == 4;
  }
  return stopped ? kRequeueExitCode : failed ? 1 : 0;
}

int report_outcomes(const std::vector<config::RunSpec>& runs, const std::vector<Outcome>& outcomes,
                    const std::filesystem::path& output, const std::vector<config::RunSpec>& all_runs,
                    const std::optional<Shard>& shard) {
  std::map<std::string, std::vector<SweepIndexRow>> index;
  std::map<std::string, SweepIndexMerge> merge;
  for (const auto& r : all_runs) merge[r.sweep].order.push_back(r.id());
  // index.csv's metric columns: the runner's, every model kind's summary metrics and every task's
  // headline metric.
  std::set<std::string> metric_names = {"final_loss", "valid_loss", "mqar_acc"};
  for (const auto& kind : model::model_kinds())
    for (const auto& sm : model::kind_traits(kind).summary_metrics) metric_names.insert(sm.name);
  for (const auto& t : eval::known_task_names()) {
    try {
      metric_names.insert(t + "_" + eval::headline_metric(t));
    } catch (const Error&) {  // a task whose metrics depend on its options: its columns follow others
    }
  }
  auto is_metric = [metric_names](const std::string& c) { return metric_names.count(c) > 0; };
  // Columns that mean something for some run (first-seen order): an evaluation column for the
  // runs whose data make its task meaningful (eval_column_applies), the recall column for runs
  // with MQAR, a model metric where the run's model gave a value (AMOR's fire rate: NaN without
  // gates). A cell that does not apply is blank; one that applies without a value (a failed or
  // pending run) is "-". A column no run has is left out.
  std::vector<std::string> cols;
  for (const auto& r : runs)
    for (const auto& c : eval_columns(r.config))
      if (eval_column_applies(r.config, c) && std::find(cols.begin(), cols.end(), c) == cols.end())
        cols.push_back(c);
  std::vector<model::SummaryMetric> mcols;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& own_model = model_summary(runs[i].config);
    for (size_t j = 0; j < own_model.size() && j < outcomes[i].model.size(); ++j)
      if (!std::isnan(outcomes[i].model[j]) &&
          std::none_of(mcols.begin(), mcols.end(), [&](const auto& m) { return m.name == own_model[j].name; }))
        mcols.push_back(own_model[j]);
  }
  const bool show_recall =
      std::any_of(runs.begin(), runs.end(), [](const auto& r) { return recall_applies(r.config); });
  const bool show_valid = std::any_of(outcomes.begin(), outcomes.end(),
                                      [](const Outcome& o) { return !std::isnan(o.valid_loss); });
  auto task_of = [&](const std::string& col) {
    for (const auto& r : runs)
      for (const auto& t : eval::harness_tasks(r.config))
        if (col == t + "_" + eval::headline_metric(t)) return t;
    return col;
  };
  std::string head = fmt::format("\n{:<44} {:<8} {:>10}", "run", "status", "loss");
  if (show_valid) head += fmt::format(" {:>10}", "valid");
  if (show_recall) head += fmt::format(" {:>8}", "recall");
  for (const auto& m : mcols) head += fmt::format(" {:>{}}", m.label, std::max<size_t>(8, m.label.size()));
  for (const auto& c : cols) head += fmt::format(" {:>{}}", task_of(c), std::max<size_t>(8, task_of(c).size()));
  std::printf("%s\n", head.c_str());
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const Outcome& oc = outcomes[i];
    static const char* names[] = {"pending", "done", "done", "stopped", "failed"};
    std::string line = fmt::format("{:<44} {:<8} {:>10}", r.id(), names[oc.status], fmt_num(oc.final_loss));
    if (show_valid) line += fmt::format(" {:>10}", fmt_num(oc.valid_loss));
    if (show_recall)
      line += fmt::format(" {:>8}", recall_applies(r.config) ? fmt_num(oc.mqar_acc, "{:.3f}") : std::string(""));
    const auto& own_model = model_summary(r.config);
    for (const auto& m : mcols) {
      double v = NAN;
      for (size_t j = 0; j < own_model.size() && j < oc.model.size(); ++j)
        if (own_model[j].name == m.name) v = oc.model[j];
      line += fmt::format(" {:>{}}", std::isnan(v) ? std::string("") : fmt_num(v, "{:.3f}"),
                          std::max<size_t>(8, m.label.size()));
    }
    const auto own = eval_columns(r.config);
    for (const auto& c : cols) {
      auto it = std::find(own.begin(), own.end(), c);
      const bool applies = it != own.end() && eval_column_applies(r.config, c);
      const double v = applies ? oc.evals.at(static_cast<size_t>(it - own.begin())) : NAN;
      line += fmt::format(" {:>{}}", applies ? fmt_num(v, "{:.3f}") : std::string(""),
                          std::max<size_t>(8, task_of(c).size()));
    }
    std::printf("%s\n", line.c_str());
    SweepIndexRow row;
    row.run = r.name;
    row.hash = r.hash8;
    row.status = oc.status == 1 || oc.status == 2 ? RunStatus::Done
                 : oc.status == 4                 ? RunStatus::Failed
                                                  : RunStatus::Pending;
    row.keys = r.overrides;
    for (auto [k, v] : {std::pair<const char*, double>{"final_loss", oc.final_loss},
                        {"valid_loss", oc.valid_loss}, {"mqar_acc", oc.mqar_acc}})
      if (!std::isnan(v)) row.metrics.emplace_back(k, v);
    for (size_t j = 0; j < own_model.size() && j < oc.model.size(); ++j)
      if (!std::isnan(oc.model[j])) row.metrics.emplace_back(own_model[j].name, oc.model[j]);
    // index.csv: the same cells (a score that does not apply is left empty, not written).
    for (size_t c = 0; c < own.size(); ++c)
      if (!std::isnan(oc.evals.at(c)) && eval_column_applies(r.config, own[c]))
        row.metrics.emplace_back(own[c], oc.evals[c]);
    row.error = oc.message;
    index[r.sweep].push_back(row);
    // A run skipped as DONE or never started: the row already in the file (if any) knows more.
    if (oc.status == 0 || oc.status == 2) merge[r.sweep].weak.insert(sweep_index_id(row));
  }
  if (shard)
    std::printf("(shard %s: %zu of the %zu runs; %s/<sweep>/index.csv holds every job's runs)\n",
                shard->str().c_str(), runs.size(), all_runs.size(), output.string().c_str());
  for (auto& [sweep, rows] : index) {
    merge[sweep].is_metric = is_metric;
    update_sweep_index((output / sweep).string(), rows, merge[sweep]);
  }
  std::vector<int> statuses;
  for (const auto& oc : outcomes) statuses.push_back(oc.status);
  return exit_status_of(statuses);
}

}  // namespace amor
