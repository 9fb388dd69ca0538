#include "runner/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>

#include "data/json/json.h"
#include "data/synthetic/token_task.h"
#include "kernels/core/error.h"
#include "kernels/core/profile.h"
#include "models/io/model_weights.h"
#include "models/io/safetensors.h"
#include "models/lm/language_model.h"
#include "runner/app/version.h"
#include "runner/config/canonical.h"
#include "runner/dist/device_select.h"
#include "runner/dist/fsdp.h"
#include "runner/dist/mpi_communicator.h"
#include "runner/dist/run_group.h"
#include "runner/eval/model_eval.h"
#include "runner/eval/run_config_tasks.h"
#ifdef AMOR_HAVE_CUDA
#include "runner/dist/nccl_communicator.h"
#endif
#include "runner/output/run_file.h"
#include "runner/train/checkpoints.h"
#include "runner/train/data_setup.h"
#include "runner/train/lr_schedule.h"
#include "runner/train/progress.h"
#include "runner/train/stop_signal.h"

namespace amor {

namespace fs = std::filesystem;

namespace {

// The run's dtypes (design §2). cpu: masters and compute in train.dtype (f32 or f64). cuda: f32
// masters, moments and gradients; compute in bf16 (train.dtype bf16 or auto) or f32 (exactness
// checks against the cpu).
struct RunDtypes {
  DType master = DType::F32, compute = DType::F32;
  DType loss = DType::F32;  // the per-token loss and its gradient (f32 statistics on cuda)
};

RunDtypes run_dtypes(const config::RunConfig& cfg) {
  const std::string& t = cfg.train.dtype;
  const bool cuda = cfg.device == "cuda";
  RunDtypes d;
  if (t == "f64") {
    AMOR_CHECK(!cuda, "train.dtype: f64 runs on the cpu only (device: cuda computes in bf16 or f32)");
    d.master = d.compute = d.loss = DType::F64;
  } else if (t == "bf16" || (t == "auto" && cuda)) {
    AMOR_CHECK(cuda, "train.dtype: bf16 needs device: cuda (the cpu backend computes in f32 or f64)");
    d.compute = DType::BF16;
  } else if (t != "f32" && t != "auto") {
    throw Error(fmt::format("train.dtype: '{}' is not one of auto, f32, f64, bf16", t));
  }
  return d;
}

// A cuda tensor's host copy (what the logging and scoring below read); cpu tensors as they are.
Tensor host(const Tensor& t) { return t.defined() && !t.is_cpu() ? t.to(Device::CPU) : t; }

// The per-token outputs that the trainer reads, on the host.
void to_host(model::StepOutput& out) {
  out.token_loss = host(out.token_loss);
  out.entropy = host(out.entropy);
  out.modes = host(out.modes);
  out.predictions = host(out.predictions);
  for (auto& g : out.gates) g = host(g);
  for (auto& g : out.gate_entropy) g = host(g);
}

// tokens and targets on the compute device; sample ids stay on the host (they seed Oryx's modes).
model::Batch on_device(model::Batch b, Device dev) {
  if (dev == Device::CPU) return b;
  b.tokens = b.tokens.to(dev);
  b.targets = b.targets.to(dev);
  return b;
}

// Per-token loss weights for a micro-batch: 1/global_valid at every position with a target.
Tensor loss_weights(const Tensor& targets, double global_valid, DType dtype) {
  Tensor w = Tensor::zeros(targets.shape(), dtype);
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i)
    if (t[i] != synthetic::kIgnore) w.set_item(i, 1.0 / global_valid);
  return w;
}

int64_t count_valid(const Tensor& targets) {
  int64_t n = 0;
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i) n += t[i] != synthetic::kIgnore;
  return n;
}

// The model's summary metrics (run_contract.h) out of its metric row: (name, value), NaN kept.
std::vector<std::pair<std::string, double>> summary_values(const model::LanguageModel& m,
                                                           const model::MetricRow& row) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& sm : m.summary_metrics()) {
    auto it = row.find(sm.name);
    out.emplace_back(sm.name, it == row.end() || it->second.empty() ? NAN : it->second[0]);
  }
  return out;
}

struct EvalResult {
  double loss = 0, tokens = 0;
  std::vector<std::pair<std::string, double>> summary;  // the model's summary metrics
  double recall_correct = 0, recall_labelled = 0;
  std::vector<double> per_example_acc;
  TokenSequences sequences;  // rank 0's first sequences, for /tokens/valid
};

constexpr int64_t kTokenSequencesSaved = 16;  // per evaluation, so run.h5 stays small

EvalResult evaluate(dist::Fsdp& fsdp, const model::LanguageModel& model, BatchSource& valid, bool recall,
                    int64_t micro_batch, int64_t max_examples, dist::Communicator& comm, Device dev) {
  const int gate_rows = static_cast<int>(model.token_gate_rows());
  EvalResult r;
  valid.set_position("0:0");
  const int64_t global_batch = micro_batch * comm.size();  // sequences are dealt over the ranks
  int64_t batches = valid.sequences() / global_batch;
  if (max_examples > 0) batches = std::min(batches, (max_examples + global_batch - 1) / global_batch);
  AMOR_CHECK(batches > 0, "data: the validation set ({} sequences) is smaller than one global "
             "micro-batch of {} sequences", valid.sequences(), global_batch);
  double loss_sum = 0, valid_tokens = 0;
  std::unique_ptr<model::StepMetrics> metrics = model.new_step_metrics();
  std::vector<std::vector<uint8_t>> gates(static_cast<size_t>(gate_rows));
  for (int64_t b = 0; b < batches; ++b) {
    model::Batch batch = valid.next();
    const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
    model::StepOutput out = fsdp.forward(on_device(batch, dev), /*training=*/false);
    to_host(out);
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
    for (int64_t i = 0; i < B && static_cast<int64_t>(r.sequences.lengths.size()) < kTokenSequencesSaved; ++i) {
      r.sequences.lengths.push_back(T);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t j = i * T + t;
        r.sequences.token_ids.push_back(batch.tokens.data<int32_t>()[j]);
        r.sequences.entropy.push_back(static_cast<float>(out.entropy.item(j)));
        // NaN where there is no target (design §6), not the 0 the loss tensor holds there.
        const bool scored = batch.targets.data<int32_t>()[j] != synthetic::kIgnore;
        r.sequences.loss.push_back(scored ? static_cast<float>(out.token_loss.item(j)) : NAN);
        r.sequences.mode.push_back(out.modes.defined() ? out.modes.data<uint8_t>()[j] : 0);
        for (int k = 0; k < gate_rows; ++k) gates[static_cast<size_t>(k)].push_back(out.gates[static_cast<size_t>(k)].data<uint8_t>()[j]);
      }
    }
  }
  for (auto& g : gates) r.sequences.gate.insert(r.sequences.gate.end(), g.begin(), g.end());  // [K, total]
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

// An unsharded copy of the model for the evaluation harness (collective: every rank of the run
// gathers every unit), with the model's state beyond its parameters (AMOR's frozen thresholds).
// On the run's device, in the master dtype.
std::unique_ptr<model::LanguageModel> eval_replica(const config::RunConfig& cfg, dist::Fsdp& fsdp,
                                                   model::LanguageModel& trained, DType dtype, Device dev) {
  auto full = fsdp.full_parameters();
  auto replica = model::build_model(cfg.model, dtype);
  const auto& params = replica->params().params();
  AMOR_CHECK(params.size() == full.size(), "eval: the replica has {} parameters, the run {}",
             params.size(), full.size());
  for (size_t i = 0; i < params.size(); ++i) {
    AMOR_CHECK(params[i]->name == full[i].first, "eval: replica parameter {} is '{}', the run's '{}'",
               i, params[i]->name, full[i].first);
    params[i]->value = full[i].second.to(dev);
  }
  replica->restore_checkpoint_state(trained.checkpoint_state(), /*required=*/true);
  return replica;
}

// eval.checkpoint: a checkpoint folder (holding fsdp.json) or a run folder (its newest checkpoint).
fs::path eval_checkpoint_dir(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / "fsdp.json")) return p;
  if (fs::is_directory(p / "checkpoints"))
    if (auto latest = Checkpoints(p / "checkpoints", 1).latest()) return *latest;
  throw Error(fmt::format("eval.checkpoint: '{}' is neither a checkpoint folder (with fsdp.json) nor a "
                          "run folder with a complete checkpoint under checkpoints/", path));
}

}  // namespace

RunResult train_run(const config::RunSpec& spec, dist::Communicator& comm, const TrainerOptions& opt) {
  const config::RunConfig& cfg = spec.config;
  const bool root = comm.rank() == 0;
  RunResult result;
  install_stop_handlers(cfg.checkpoint.signal);
  const RunDtypes dtypes = run_dtypes(cfg);
  const Device dev = cfg.device == "cuda" ? Device::CUDA : Device::CPU;

  // The communicator that moves tensors: the group's MPI one on the cpu; on cuda an NCCL one over
  // the same ranks (bootstrapped through MPI), one GPU per rank. Host-side agreement (losses,
  // counts, the stop flag) stays on the MPI communicator either way.
  std::unique_ptr<dist::Communicator> nccl;
  if (dev == Device::CUDA) {
    auto* mpi = dynamic_cast<dist::MpiCommunicator*>(&comm);
    AMOR_CHECK(mpi, "device: cuda needs the run group's MPI communicator to set up NCCL");
    dist::select_cuda_device(mpi->handle());
#ifdef AMOR_HAVE_CUDA
    nccl = std::make_unique<dist::NcclCommunicator>(mpi->handle());
#endif
  }
  dist::Communicator& tensor_comm = nccl ? *nccl : comm;

  // Model, sharding, data. Initialised on the host (the same numbers on every device), then moved.
  auto model = model::build_model(cfg.model, dtypes.master);
  model->params().initialize(static_cast<uint64_t>(cfg.train.seed));
  if (!cfg.eval.weights.empty()) {  // existing weights: to evaluate (train.steps 0) or to start from
    try {
      model::load_model_weights(cfg.eval.weights, model->params());
    } catch (const Error& e) {
      throw Error(fmt::format("eval.weights: {}", e.what()));
    }
  }
  if (dev != Device::CPU)
    for (auto& p : model->params().params()) p->value = p->value.to(dev);
  model->set_run_seed(static_cast<uint64_t>(cfg.train.seed));
  dist::FsdpOptions fo;
  fo.beta1 = cfg.train.beta1;
  fo.beta2 = cfg.train.beta2;
  fo.eps = cfg.train.eps;
  fo.weight_decay = cfg.train.weight_decay;
  // train.clip 0 turns clipping off: an infinite limit never scales the gradients.
  fo.max_grad_norm = cfg.train.clip > 0 ? cfg.train.clip : std::numeric_limits<double>::infinity();
  if (dtypes.compute != dtypes.master) fo.compute_dtype = dtypes.compute;
  dist::Fsdp fsdp(*model, tensor_comm, fo);  // also gives the model its run group (fsdp.h)
  RunData data = make_run_data(cfg, comm.rank(), comm.size());
  dist::CommRunGroup metric_group(comm);  // reduces the model's metrics on the host communicator

  // Resume from the newest checkpoint that loads (resume_from_checkpoint: a damaged newer one is
  // set aside with a warning).
  Checkpoints ckpts(opt.run_dir / "checkpoints", cfg.checkpoint.keep);
  int64_t start_step = 0, tokens_seen = 0;
  if (!ckpts.steps().empty()) {
    resume_from_checkpoint(ckpts, comm, [&](const fs::path& dir) {
      dist::FsdpCheckpoint c = fsdp.load(dir.string());
      data.train->set_position(c.extra.at("data_position"));
      tokens_seen = std::stoll(c.extra.at("tokens_seen"));
      model->restore_checkpoint_state(c.extra, /*required=*/true);
      start_step = c.step;
    });
  } else if (!cfg.eval.checkpoint.empty()) {  // evaluate another run's checkpoint (train.steps 0)
    const fs::path dir = eval_checkpoint_dir(cfg.eval.checkpoint);
    dist::FsdpCheckpoint c = fsdp.load(dir.string());
    model->restore_checkpoint_state(c.extra, /*required=*/false);
  }

  // The harness's tasks (runner/eval): specs resolved from eval.*, the tokenizer the data uses.
  const std::vector<std::string> tasks = eval::harness_tasks(cfg);
  std::vector<eval::TaskSpec> task_specs;
  std::unique_ptr<Tokenizer> eval_tokenizer;
  if (!tasks.empty()) eval_tokenizer = make_tokenizer(cfg.data.tokenizer);
  for (const auto& t : tasks) {
    task_specs.push_back(eval::task_spec(cfg, t));
    // mqar's default vocabulary (model.vocab) stops at the tokenizer's ids.
    if (t == "mqar" && cfg.eval.mqar.vocab_size == 0)
      task_specs.back().mqar_vocab_size = std::min(task_specs.back().mqar_vocab_size, eval_tokenizer->vocab_size());
  }

  // run.h5 (rank 0).
  std::optional<RunFile> h5;
  const fs::path h5_path = opt.run_dir / "run.h5";
  if (root) {
    if (start_step > 0 && fs::exists(h5_path)) {
      h5.emplace(RunFile::open(h5_path.string(), start_step, spec.hash8));
    } else {
      RunAttrs attrs;
      attrs.config = config::canonical_yaml(cfg);
      attrs.config_hash = spec.hash8;
      attrs.sweep = spec.sweep;
      attrs.run_name = spec.name;
      attrs.amor_run_version = version();
      attrs.git_commit = git_commit();
      attrs.world_size = comm.size();
      attrs.created = utc_timestamp();
      RunLayout layout;
      EvalTaskSpec valid_task{"valid", {"loss", "ppl"}, {}};
      for (const auto& sm : model->summary_metrics()) valid_task.metrics.push_back(sm.name);
      layout.eval_tasks.push_back(valid_task);
      if (data.recall_task) layout.eval_tasks.push_back({"mqar", {"acc"}, {"acc"}});
      // The memory report (per rank, bytes) as an /eval group: its attributes exist from creation,
      // as SWMR requires, and are filled after the first step.
      layout.eval_tasks.push_back({"memory", {"param_bytes", "grad_bytes", "optimizer_bytes",
                                              "peak_gathered_bytes", "model_param_bytes", "world_size"}, {}});
      layout.token_sets = {"valid"};
      for (const auto& ts : task_specs) {
        layout.eval_tasks.push_back(eval::task_layout(ts));
        layout.token_sets.push_back(ts.name);
      }
      layout.amor_blocks = static_cast<int>(model->token_gate_rows());
      for (const auto& c : model->metric_columns()) layout.train_columns.push_back({c.name, c.shape});
      h5.emplace(RunFile::create(h5_path.string(), attrs, layout));
    }
  }

  auto save_checkpoint = [&](int64_t step) {
    std::map<std::string, std::string> extra{{"data_position", data.train->position()},
                                             {"tokens_seen", std::to_string(tokens_seen)},
                                             {"config_hash", spec.hash8}};
    for (auto& [key, value] : model->checkpoint_state()) {
      AMOR_CHECK(!extra.count(key), "the model's checkpoint state '{}' has a name the runner uses", key);
      extra[key] = std::move(value);
    }
    // run.h5 first: once checkpoint N exists, its rows up to step N must be on disk too (a resume
    // from N truncates the file back to N and would otherwise leave a gap).
    if (h5) h5->flush();
    ckpts.save(step, comm, [&](const std::string& dir) { fsdp.save(dir, step, extra); });
  };

  // A score that is not a number means broken weights (e.g. garbled eval.weights) or a diverged
  // model: written to run.h5 for inspection, then the run fails instead of being marked DONE.
  auto require_finite = [&](double v, const std::string& what, int64_t step) {
    if (std::isfinite(v)) return;
    std::string src = !cfg.eval.weights.empty() ? fmt::format(" (weights from eval.weights {})", cfg.eval.weights)
                      : !cfg.eval.checkpoint.empty() ? fmt::format(" (weights from eval.checkpoint {})", cfg.eval.checkpoint)
                                                     : "";
    throw Error(fmt::format("evaluation at step {}: {} is {}: the model{} produces non-finite values; "
                            "the run is not marked DONE", step, what, std::isnan(v) ? "NaN" : fmt::format("{}", v), src));
  };
  auto run_eval = [&](int64_t step) {
    EvalResult e = evaluate(fsdp, *model, *data.valid, data.recall_task, cfg.train.micro_batch,
                            cfg.eval.max_examples, comm, dev);
    result.metrics["valid_loss"] = e.loss;
    for (const auto& [name, v] : e.summary)
      if (!std::isnan(v)) result.metrics["valid_" + name] = v;
    if (data.recall_task) result.metrics["mqar_acc"] = e.recall_labelled > 0 ? e.recall_correct / e.recall_labelled : NAN;
    if (h5) {
      std::map<std::string, double> valid{{"loss", e.loss}, {"ppl", std::exp(e.loss)}};
      for (const auto& [name, v] : e.summary) valid[name] = v;
      h5->write_eval("valid", step, valid);
      if (data.recall_task)
        h5->write_eval("mqar", step, {{"acc", result.metrics["mqar_acc"]}},
                       {{"acc", e.per_example_acc}});
      h5->write_tokens("valid", step, e.sequences);
      h5->flush();
    }
    require_finite(e.loss, "the validation loss", step);
    if (!task_specs.empty()) {
      // The harness on an unsharded replica; batches dealt over the run's ranks (model_eval.h).
      auto replica = eval_replica(cfg, fsdp, *model, dtypes.master, dev);
      eval::ModelEvalOptions mo;
      mo.max_length = cfg.eval.max_length;
      mo.batch_size = cfg.eval.batch_size;
      mo.tokens_per_task = cfg.eval.tokens_per_task;
      eval::ModelEval em(*replica, *eval_tokenizer, &comm, mo);
      for (const auto& ts : task_specs) {
        eval::TaskResult tr;
        try {
          tr = eval::run_task(ts, em);
        } catch (const Error& err) {
          throw Error(fmt::format("eval task {}: {}", ts.name, err.what()));
        }
        result.metrics[ts.name + "_" + eval::headline_metric(ts.name)] = tr.metrics.at(eval::headline_metric(ts.name));
        if (h5) {
          h5->write_eval(ts.name, step, tr.metrics, tr.per_example);
          h5->write_tokens(ts.name, step, em.records(ts.name));
          h5->flush();
        }
        require_finite(tr.metrics.at(eval::headline_metric(ts.name)),
                       fmt::format("eval task {}'s {}", ts.name, eval::headline_metric(ts.name)), step);
      }
    }
    return e;
  };

  Progress progress(spec.id(), cfg.train.steps, cfg.train.log_every, stdout, opt.live);
  const bool quiet = opt.quiet || !root;
  auto t_last = std::chrono::steady_clock::now();
  // AMOR_PROFILE=1: the step's time by section (kernels/core/profile.h), over the steps after the
  // first (which pays for first allocations and GEMM plans), printed and written to profile.txt.
  profile::set_device(dev);
  double profiled_seconds = 0;
  int64_t profiled_steps = 0;
  auto write_profile = [&] {
    if (!profile::enabled() || profiled_steps == 0) return;
    const std::string table = profile::format_table(profile::rows(), profiled_steps, profiled_seconds);
    if (!quiet) std::printf("%s step profile over steps %lld-%lld (AMOR_PROFILE):\n%s", spec.id().c_str(),
                            static_cast<long long>(cfg.train.steps - profiled_steps + 1),
                            static_cast<long long>(cfg.train.steps), table.c_str());
    if (root) write_file_atomic((opt.run_dir / "profile.txt").string(), table);
  };
  double last_loss = NAN;

  for (int64_t step = start_step; step < cfg.train.steps; ++step) {
    const double lr = lr_at(step, cfg.train.steps, cfg.train.warmup_steps, cfg.train.lr, cfg.train.min_lr_ratio);
    // All micro-batches first: the loss is a mean over the global batch's valid tokens, which
    // every rank must know before its first backward.
    std::vector<model::Batch> micro;
    int64_t local_valid = 0;
    for (int64_t a = 0; a < cfg.train.grad_accum; ++a) {
      micro.push_back(data.train->next());
      local_valid += count_valid(micro.back().targets);
    }
    const double global_valid = static_cast<double>(std::max<int64_t>(1, comm.all_reduce_sum(local_valid)));
    fsdp.zero_grad();
    double loss_sum = 0;
    std::unique_ptr<model::StepMetrics> metrics = model->new_step_metrics();
    for (auto& b : micro) {
      model::StepOutput out = fsdp.forward(on_device(b, dev), /*training=*/true);
      loss_sum += out.loss_sum;
      metrics->add(out);
      fsdp.backward(loss_weights(b.targets, global_valid, dtypes.loss).to(dev));
    }
    const double loss = comm.all_reduce_sum(loss_sum) / global_valid;
    if (!std::isfinite(loss)) {
      result.status = TrainStatus::Failed;
      result.message = fmt::format("loss is {} at step {}; stopped (the last good checkpoint is kept)", loss, step + 1);
      if (!quiet) progress.finish("FAILED: " + result.message);
      return result;
    }
    double grad_norm = 0;
    {
      profile::Section ps("optimizer step (grad norm, AdamW)");
      grad_norm = fsdp.step(lr);
    }
    const int64_t step_tokens = comm.all_reduce_sum(static_cast<int64_t>(micro.size()) * micro[0].tokens.numel());
    tokens_seen += step_tokens;
    last_loss = loss;

    model::MetricRow metric_row = metrics->finish(metric_group);
    auto now = std::chrono::steady_clock::now();
    double dt = std::chrono::duration<double>(now - t_last).count();
    t_last = now;
    if (step > start_step) {
      profiled_seconds += dt;
      profiled_steps += 1;
    } else {
      profile::reset();
    }
    const int64_t done = step + 1;
    if (h5) {
      TrainRow row;
      row.step = done;
      row.tokens = tokens_seen;
      row.loss = loss;
      row.lr = lr;
      row.grad_norm = grad_norm;
      row.tokens_per_s = dt > 0 ? static_cast<double>(step_tokens) / dt : 0;
      row.columns = metric_row;
      h5->append_train(row);
    }
    if (step == start_step) {  // after the first step: every buffer of a step has existed once
      dist::FsdpMemory mem = fsdp.memory();
      if (!quiet) std::printf("%s memory per rank: %s\n", spec.id().c_str(), mem.str().c_str());
      if (h5)
        h5->write_eval("memory", done,
                       {{"param_bytes", static_cast<double>(mem.param_bytes)},
                        {"grad_bytes", static_cast<double>(mem.grad_bytes)},
                        {"optimizer_bytes", static_cast<double>(mem.optimizer_bytes)},
                        {"peak_gathered_bytes", static_cast<double>(mem.peak_gathered_bytes)},
                        {"model_param_bytes", static_cast<double>(mem.model_param_bytes)},
                        {"world_size", static_cast<double>(mem.world_size)}});
    }
    if (!quiet) {
      ProgressRow pr{done, loss, lr, dt > 0 ? static_cast<double>(step_tokens) / dt : 0, {}};
      const auto summary = summary_values(*model, metric_row);
      const auto specs = model->summary_metrics();
      for (size_t i = 0; i < specs.size(); ++i)
        if (!std::isnan(summary[i].second)) pr.metrics.emplace_back(specs[i].label, summary[i].second);
      progress.update(pr);
    }

    // A stop request from any rank stops every rank at this step boundary, with a checkpoint.
    const bool stop = comm.all_reduce_max(stop_requested() ? 1 : 0) != 0;
    const bool last = done == cfg.train.steps;
    if (cfg.train.eval_every > 0 && done % cfg.train.eval_every == 0 && !last) run_eval(done);
    if (last) write_profile();  // before the final checkpoint (bench_train.py stops the run there)
    if (stop || (cfg.checkpoint.every > 0 && done % cfg.checkpoint.every == 0) || last) save_checkpoint(done);
    if (stop && !last) {
      result.status = TrainStatus::Stopped;
      result.message = fmt::format("stopped by {} at step {}: checkpointed, run again to resume",
                                   stop_signal_name().empty() ? "a peer rank" : stop_signal_name(), done);
      if (!quiet) progress.finish(result.message);
      return result;
    }
  }

  EvalResult final_eval = run_eval(cfg.train.steps);
  {
    // The final weights as one safetensors file (models/io/model_weights.h): what eval.weights
    // reads, and what tests/torch_ref loads into PyTorch. Collective; rank 0 writes.
    auto full = eval_replica(cfg, fsdp, *model, dtypes.master, Device::CPU);
    if (root) model::save_model_weights((opt.run_dir / "model.safetensors").string(), full->params(), cfg.model, version());
  }
  result.metrics["final_loss"] = last_loss;
  for (const auto& [name, v] : final_eval.summary)
    if (!std::isnan(v)) result.metrics[name] = v;
  if (h5) {
    h5->finish(utc_timestamp());
    h5->close();
  }
  result.status = TrainStatus::Done;
  if (!quiet) {
    std::string summary = fmt::format("done: final loss {:.4f}, valid loss {:.4f}", last_loss, final_eval.loss);
    if (result.metrics.count("mqar_acc")) summary += fmt::format(", recall acc {:.3f}", result.metrics["mqar_acc"]);
    for (const auto& [name, v] : final_eval.summary) {  // "fire_rate" reads "fire rate"
      std::string words = name;
      std::replace(words.begin(), words.end(), '_', ' ');
      if (!std::isnan(v)) summary += fmt::format(", {} {:.3f}", words, v);
    }
    for (const auto& ts : task_specs) {
      const std::string m = eval::headline_metric(ts.name);
      summary += fmt::format(", {} {} {:.3f}", ts.name, m, result.metrics[ts.name + "_" + m]);
    }
    progress.finish(summary);
  }
  return result;
}

}  // namespace amor
