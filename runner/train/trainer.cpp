#include "runner/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/core/error.h"
#include "kernels/core/profile.h"
#include "models/io/model_weights.h"
#include "models/io/safetensors.h"
#include "runner/app/version.h"
#include "runner/dist/device_select.h"
#include "runner/dist/mpi_communicator.h"
#include "runner/eval/model_eval.h"
#include "runner/eval/run_config_tasks.h"
#ifdef AMOR_HAVE_CUDA
#include "runner/dist/nccl_communicator.h"
#endif
#include "runner/train/lr_schedule.h"
#include "runner/train/run_record.h"
#include "runner/train/step_tensors.h"
#include "runner/train/stop_signal.h"

namespace amor {

namespace fs = std::filesystem;

Trainer::Trainer(const config::RunSpec& spec, dist::Communicator& comm, const TrainerOptions& opt)
    : spec_(spec), cfg_(spec.config), comm_(comm), opt_(opt), root_(comm.rank() == 0),
      quiet_(opt.quiet || comm.rank() != 0) {}

Trainer::~Trainer() = default;

void Trainer::setup() {
  install_stop_handlers(cfg_.checkpoint.signal);
  dtypes_ = run_dtypes(cfg_);
  dev_ = cfg_.device == "cuda" ? Device::CUDA : Device::CPU;

  // The communicator that moves tensors: the group's MPI one on the cpu; on cuda an NCCL one over
  // the same ranks (bootstrapped through MPI), one GPU per rank. Host-side agreement (losses,
  // counts, the stop flag) stays on the MPI communicator either way.
  if (dev_ == Device::CUDA) {
    auto* mpi = dynamic_cast<dist::MpiCommunicator*>(&comm_);
    AMOR_CHECK(mpi, "device: cuda needs the run group's MPI communicator to set up NCCL");
    dist::select_cuda_device(mpi->handle());
#ifdef AMOR_HAVE_CUDA
    nccl_ = std::make_unique<dist::NcclCommunicator>(mpi->handle());
#endif
  }
  tensor_comm_ = nccl_ ? nccl_.get() : &comm_;

  // Model, sharding, data. Initialised on the host (the same numbers on every device), then moved.
  model_ = opt_.build_model ? opt_.build_model(cfg_.model, dtypes_.master) : model::build_model(cfg_.model, dtypes_.master);
  model_->params().initialize(static_cast<uint64_t>(cfg_.train.seed));
  if (!cfg_.eval.weights.empty()) {  // existing weights: to evaluate (train.steps 0) or to start from
    try {
      // Into the model, not only its parameters: a file converted from the AMOR authors' layout
      // also carries the gates' thresholds (amor-run convert-weights).
      model::load_model_weights(cfg_.eval.weights, *model_);
    } catch (const Error& e) {
      throw Error(fmt::format("eval.weights: {}", e.what()));
    }
  }
  if (dev_ != Device::CPU) model_->params().to(dev_);
  model_->set_run_seed(static_cast<uint64_t>(cfg_.train.seed));
  dist::FsdpOptions fo;
  fo.beta1 = cfg_.train.beta1;
  fo.beta2 = cfg_.train.beta2;
  fo.eps = cfg_.train.eps;
  fo.weight_decay = cfg_.train.weight_decay;
  // train.clip 0 turns clipping off: an infinite limit never scales the gradients.
  fo.max_grad_norm = cfg_.train.clip > 0 ? cfg_.train.clip : std::numeric_limits<double>::infinity();
  if (dtypes_.compute != dtypes_.master) fo.compute_dtype = dtypes_.compute;
  fsdp_ = std::make_unique<dist::Fsdp>(*model_, *tensor_comm_, fo);  // also gives the model its run group
  metric_group_ = std::make_unique<dist::CommRunGroup>(comm_);
  data_ = make_run_data(cfg_, comm_.rank(), comm_.size());
  harness_ = harness_tasks_for(cfg_);
}

void Trainer::restore() {
  // Resume from the newest checkpoint that loads (resume_from_checkpoint: a damaged newer one is
  // set aside with a warning).
  ckpts_ = std::make_unique<Checkpoints>(opt_.run_dir / "checkpoints", cfg_.checkpoint.keep);
  fs::path resumed_from;
  if (!ckpts_->steps().empty()) {
    resume_from_checkpoint(*ckpts_, comm_, [&](const fs::path& dir) {
      dist::FsdpCheckpoint c = fsdp_->load(dir.string());
      data_.train->set_position(c.extra.at("data_position"));
      tokens_seen_ = std::stoll(c.extra.at("tokens_seen"));
      model_->restore_checkpoint_state(c.extra, /*required=*/true);
      start_step_ = c.step;
      resumed_from = dir;
    });
    if (root_ && !opt_.quiet) {
      std::printf("resuming %s from step %lld (checkpoint %s)\n", spec_.id().c_str(),
                  static_cast<long long>(start_step_), resumed_from.string().c_str());
      std::fflush(stdout);
    }
  } else if (!cfg_.eval.checkpoint.empty()) {  // evaluate another run's checkpoint (train.steps 0)
    dist::FsdpCheckpoint c = fsdp_->load(eval_checkpoint_dir(cfg_.eval.checkpoint).string());
    model_->restore_checkpoint_state(c.extra, /*required=*/false);
  }
  if (root_) {
    h5_.emplace(open_run_record(opt_.run_dir / "run.h5", spec_, comm_.size(), *model_, data_.recall_task,
                                harness_.specs, start_step_, opt_.threads));
    // A resumed run computes bitwise as before only with the BLAS threads it started with.
    const int64_t had = h5_->threads();
    if (start_step_ > 0 && had > 0 && opt_.threads > 0 && had != opt_.threads)
      std::fprintf(stderr,
                   "amor-run: warning: run %s started with %lld BLAS threads per rank and resumes with %d: its "
                   "losses may differ bitwise from an uninterrupted run (CPU sums depend on the thread count); "
                   "pass --threads %lld to resume as it started\n",
                   spec_.id().c_str(), static_cast<long long>(had), opt_.threads, static_cast<long long>(had));
  }
  progress_ = std::make_unique<Progress>(spec_.id(), cfg_.train.steps, cfg_.train.log_every, stdout, opt_.live);
  t_last_ = std::chrono::steady_clock::now();
  // AMOR_PROFILE=1: the step's time by section (kernels/core/profile.h), over the steps after the
  // first (which pays for first allocations and GEMM plans), printed and written to profile.txt.
  profile::set_device(dev_);
}

std::optional<StepStats> Trainer::train_step(int64_t step) {
  StepStats st;
  st.lr = lr_at(step, cfg_.train.steps, cfg_.train.warmup_steps, cfg_.train.lr, cfg_.train.min_lr_ratio);
  // All micro-batches first: the loss is a mean over the global batch's valid tokens, which
  // every rank must know before its first backward.
  std::vector<model::Batch> micro;
  int64_t local_valid = 0;
  for (int64_t a = 0; a < cfg_.train.grad_accum; ++a) {
    micro.push_back(data_.train->next());
    local_valid += count_valid(micro.back().targets);
  }
  const double global_valid = static_cast<double>(std::max<int64_t>(1, comm_.all_reduce_sum(local_valid)));
  fsdp_->zero_grad();
  double loss_sum = 0;
  std::unique_ptr<model::StepMetrics> metrics = model_->new_step_metrics();
  for (auto& b : micro) {
    model::StepOutput out = fsdp_->forward(on_device(b, dev_), /*training=*/true);
    loss_sum += out.loss_sum;
    metrics->add(out);
    fsdp_->backward(loss_weights(b.targets, global_valid, dtypes_.loss).to(dev_));
  }
  st.loss = comm_.all_reduce_sum(loss_sum) / global_valid;
  if (!std::isfinite(st.loss)) {
    result_.status = TrainStatus::Failed;
    result_.message = fmt::format("loss is {} at step {}; stopped (the last good checkpoint is kept)", st.loss, step + 1);
    if (!quiet_) progress_->finish("FAILED: " + result_.message);
    return std::nullopt;
  }
  {
    profile::Section ps("optimizer step (grad norm, AdamW)");
    st.grad_norm = fsdp_->step(st.lr);
  }
  st.tokens = comm_.all_reduce_sum(static_cast<int64_t>(micro.size()) * micro[0].tokens.numel());
  tokens_seen_ += st.tokens;
  last_loss_ = st.loss;
  st.metrics = metrics->finish(*metric_group_);
  return st;
}

void Trainer::log_step(int64_t step, const StepStats& st) {
  auto now = std::chrono::steady_clock::now();
  const double dt = std::chrono::duration<double>(now - t_last_).count();
  t_last_ = now;
  if (step > start_step_) {
    profiled_seconds_ += dt;
    profiled_steps_ += 1;
  } else {
    profile::reset();
  }
  const int64_t done = step + 1;
  const double tokens_per_s = dt > 0 ? static_cast<double>(st.tokens) / dt : 0;
  if (h5_) {
    TrainRow row;
    row.step = done;
    row.tokens = tokens_seen_;
    row.loss = st.loss;
    row.lr = st.lr;
    row.grad_norm = st.grad_norm;
    row.tokens_per_s = tokens_per_s;
    row.columns = st.metrics;
    h5_->append_train(row);
  }
  if (step == start_step_) {  // after the first step: every buffer of a step has existed once
    dist::FsdpMemory mem = fsdp_->memory();
    if (!quiet_) std::printf("%s memory per rank: %s\n", spec_.id().c_str(), mem.str().c_str());
    if (h5_)
      h5_->write_eval("memory", done,
                      {{"param_bytes", static_cast<double>(mem.param_bytes)},
                       {"grad_bytes", static_cast<double>(mem.grad_bytes)},
                       {"optimizer_bytes", static_cast<double>(mem.optimizer_bytes)},
                       {"peak_gathered_bytes", static_cast<double>(mem.peak_gathered_bytes)},
                       {"model_param_bytes", static_cast<double>(mem.model_param_bytes)},
                       {"world_size", static_cast<double>(mem.world_size)}});
  }
  if (!quiet_) {
    ProgressRow pr{done, st.loss, st.lr, tokens_per_s, {}};
    const auto specs = model_->summary_metrics();
    const auto values = summary_values(*model_, st.metrics);
    for (size_t i = 0; i < specs.size(); ++i)
      if (!std::isnan(values[i].second)) pr.metrics.emplace_back(specs[i].label, values[i].second);
    progress_->update(pr);
  }
}

// A score that is not a number means broken weights (e.g. garbled eval.weights) or a diverged
// model: written to run.h5 for inspection, then the run fails instead of being marked DONE.
void Trainer::require_finite(double v, const std::string& what, int64_t step) const {
  if (std::isfinite(v)) return;
  std::string src = !cfg_.eval.weights.empty() ? fmt::format(" (weights from eval.weights {})", cfg_.eval.weights)
                    : !cfg_.eval.checkpoint.empty() ? fmt::format(" (weights from eval.checkpoint {})", cfg_.eval.checkpoint)
                                                    : "";
  throw Error(fmt::format("evaluation at step {}: {} is {}: the model{} produces non-finite values; "
                          "the run is not marked DONE", step, what, std::isnan(v) ? "NaN" : fmt::format("{}", v), src));
}

ValidResult Trainer::evaluate(int64_t step) {
  const auto since = [t0 = std::chrono::steady_clock::now()] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  ValidResult e = evaluate_valid(*fsdp_, *model_, *data_.valid, data_.recall_task, cfg_.train.micro_batch,
                                 cfg_.eval.max_examples, comm_, dev_, data_.roles);
  result_.metrics["valid_loss"] = e.loss;
  for (const auto& [name, v] : e.summary)
    if (!std::isnan(v)) result_.metrics["valid_" + name] = v;
  if (data_.recall_task)
    result_.metrics["mqar_acc"] = e.recall_labelled > 0 ? e.recall_correct / e.recall_labelled : NAN;
  if (h5_) {
    std::map<std::string, double> valid{{"loss", e.loss}, {"ppl", std::exp(e.loss)}};
    for (const auto& [name, v] : e.summary) valid[name] = v;
    h5_->write_eval("valid", step, valid);
    if (data_.recall_task) h5_->write_eval("mqar", step, {{"acc", result_.metrics["mqar_acc"]}}, {{"acc", e.per_example_acc}});
    h5_->write_tokens("valid", step, e.sequences);
    h5_->flush();
  }
  require_finite(e.loss, "the validation loss", step);
  if (!quiet_ && !harness_.specs.empty())
    progress_->note(fmt::format("step {}: valid loss {:.4f} ({:.1f} s); evaluating {} task(s)", step, e.loss, since(),
                                harness_.specs.size()));
  if (harness_.specs.empty()) return e;
  // The harness on an unsharded replica; batches dealt over the run's ranks (model_eval.h).
  // eval.dtype: the masters' dtype (f32, exact) or the training compute dtype (bf16 on cuda).
  const DType eval_dtype = cfg_.eval.dtype == "compute" ? dtypes_.compute : dtypes_.master;
  auto replica = eval_replica(cfg_, *fsdp_, *model_, eval_dtype, dev_, opt_.build_model);
  eval::ModelEvalOptions mo;
  mo.max_length = cfg_.eval.max_length;
  mo.batch_size = cfg_.eval.batch_size;
  mo.prefill_chunk = cfg_.eval.prefill_chunk;
  mo.tokens_per_task = cfg_.eval.tokens_per_task;
  if (!quiet_) mo.note = [this](const std::string& line) { progress_->note(line); };
  eval::ModelEval em(*replica, *harness_.tokenizer, &comm_, mo);
  for (const auto& ts : harness_.specs) {
    eval::TaskResult tr;
    try {
      tr = eval::run_task(ts, em);
    } catch (const Error& err) {
      throw Error(fmt::format("eval task {}: {}", ts.name, err.what()));
    }
    const std::string headline = eval::headline_metric(ts.name);
    result_.metrics[ts.name + "_" + headline] = tr.metrics.at(headline);
    if (h5_) {
      h5_->write_eval(ts.name, step, tr.metrics, tr.per_example);
      h5_->write_tokens(ts.name, step, em.records(ts.name));
      h5_->flush();
    }
    require_finite(tr.metrics.at(headline), fmt::format("eval task {}'s {}", ts.name, headline), step);
    if (!quiet_)
      progress_->note(fmt::format("step {}: {} {} {:.4f} ({:.1f} s since the evaluation began)", step, ts.name,
                                  headline, tr.metrics.at(headline), since()));
  }
  return e;
}

void Trainer::checkpoint(int64_t step) {
  std::map<std::string, std::string> extra{{"data_position", data_.train->position()},
                                           {"tokens_seen", std::to_string(tokens_seen_)},
                                           {"config_hash", spec_.hash8}};
  for (auto& [key, value] : model_->checkpoint_state()) {
    AMOR_CHECK(!extra.count(key), "the model's checkpoint state '{}' has a name the runner uses", key);
    extra[key] = std::move(value);
  }
  // run.h5 first: once checkpoint N exists, its rows up to step N must be on disk too (a resume
  // from N truncates the file back to N and would otherwise leave a gap).
  if (h5_) h5_->flush();
  ckpts_->save(step, comm_, [&](const std::string& dir) { fsdp_->save(dir, step, extra); });
}

void Trainer::write_profile() {
  if (!profile::enabled() || profiled_steps_ == 0) return;
  const std::string table = profile::format_table(profile::rows(), profiled_steps_, profiled_seconds_);
  if (!quiet_) std::printf("%s step profile over steps %lld-%lld (AMOR_PROFILE):\n%s", spec_.id().c_str(),
                           static_cast<long long>(cfg_.train.steps - profiled_steps_ + 1),
                           static_cast<long long>(cfg_.train.steps), table.c_str());
  if (root_) write_file_atomic((opt_.run_dir / "profile.txt").string(), table);
}

void Trainer::finish() {
  ValidResult final_eval = evaluate(cfg_.train.steps);
  {
    // The final weights as one safetensors file (models/io/model_weights.h): what eval.weights
    // reads, and what tests/torch_ref loads into PyTorch. Collective; rank 0 writes.
    auto full = eval_replica(cfg_, *fsdp_, *model_, dtypes_.master, Device::CPU, opt_.build_model);
    if (root_) model::save_model_weights((opt_.run_dir / "model.safetensors").string(), full->params(), cfg_.model, version());
  }
  result_.metrics["final_loss"] = last_loss_;
  for (const auto& [name, v] : final_eval.summary)
    if (!std::isnan(v)) result_.metrics[name] = v;
  if (h5_) {
    h5_->finish(utc_timestamp());
    h5_->close();
  }
  result_.status = TrainStatus::Done;
  if (quiet_) return;
  // An evaluation-only run (train.steps: 0) has no training loss: say so rather than print "nan".
  std::string summary = cfg_.train.steps == 0
                            ? fmt::format("done: no training steps, valid loss {:.4f}", final_eval.loss)
                            : fmt::format("done: final loss {:.4f}, valid loss {:.4f}", last_loss_, final_eval.loss);
  if (result_.metrics.count("mqar_acc")) summary += fmt::format(", recall acc {:.3f}", result_.metrics["mqar_acc"]);
  for (const auto& [name, v] : final_eval.summary) {  // "fire_rate" reads "fire rate"
    std::string words = name;
    std::replace(words.begin(), words.end(), '_', ' ');
    if (!std::isnan(v)) summary += fmt::format(", {} {:.3f}", words, v);
  }
  for (const auto& ts : harness_.specs) {
    const std::string m = eval::headline_metric(ts.name);
    summary += fmt::format(", {} {} {:.3f}", ts.name, m, result_.metrics[ts.name + "_" + m]);
  }
  progress_->finish(summary);
}

RunResult Trainer::run() {
  setup();
  restore();
  for (int64_t step = start_step_; step < cfg_.train.steps; ++step) {
    std::optional<StepStats> st = train_step(step);
    if (!st) return result_;
    log_step(step, *st);
    const int64_t done = step + 1;
    // A stop request from any rank stops every rank at this step boundary, with a checkpoint.
    const bool stop = comm_.all_reduce_max(stop_requested() ? 1 : 0) != 0;
    const bool last = done == cfg_.train.steps;
    if (cfg_.train.eval_every > 0 && done % cfg_.train.eval_every == 0 && !last) evaluate(done);
    if (last) write_profile();  // before the final checkpoint (bench_train.py stops the run there)
    if (stop || (cfg_.checkpoint.every > 0 && done % cfg_.checkpoint.every == 0) || last) checkpoint(done);
    if (stop && !last) {
      result_.status = TrainStatus::Stopped;
      result_.message = fmt::format("stopped by {} at step {}: checkpointed, run again to resume",
                                    stop_signal_name().empty() ? "a peer rank" : stop_signal_name(), done);
      if (!quiet_) progress_->finish(result_.message);
      return result_;
    }
  }
  finish();
  return result_;
}

RunResult train_run(const config::RunSpec& spec, dist::Communicator& comm, const TrainerOptions& opt) {
  return Trainer(spec, comm, opt).run();
}

}  // namespace amor
