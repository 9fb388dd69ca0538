// Fsdp: sharded masters, moments and gradients; gather/release/grad_ready; the sharded AdamW step.
#include "runner/dist/fsdp.h"

#include <cmath>
#include <cstring>

#include "kernels/adamw/adamw.h"
#include "kernels/cast/cast.h"
#include "kernels/core/error.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/grad_norm/grad_norm.h"
#include "runner/dist/run_group.h"

namespace amor::dist {
namespace {

// FNV-1a over the bytes of every parameter: equal on all ranks iff they start from one model.
uint64_t params_hash(const model::ParamStore& store) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& p : store.params()) {
    Tensor c = p->value.to(Device::CPU);
    const auto* b = static_cast<const unsigned char*>(c.raw_data());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  return h;
}

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / 1048576.0); }

}  // namespace

std::string FsdpMemory::str() const {
  return fmt::format(
      "fsdp memory per rank (W={}): params {}, grads {}, optimizer {}, peak gathered {} "
      "(model {} unsharded)",
      world_size, mib(param_bytes), mib(grad_bytes), mib(optimizer_bytes), mib(peak_gathered_bytes),
      mib(model_param_bytes));
}

Fsdp::Fsdp(model::LanguageModel& model, Communicator& comm, FsdpOptions options)
    : model_(model),
      comm_(comm),
      opt_(options),
      dtype_(model.params().dtype()),
      compute_dtype_(options.compute_dtype.value_or(model.params().dtype())) {
  AMOR_CHECK(opt_.max_grad_norm > 0, "fsdp: max_grad_norm must be positive, got {}", opt_.max_grad_norm);
  AMOR_CHECK(is_floating(compute_dtype_) && dtype_size(compute_dtype_) <= dtype_size(dtype_),
             "fsdp: compute dtype {} for {} masters: the compute dtype must be a float type no "
             "wider than the masters'",
             dtype_name(compute_dtype_), dtype_name(dtype_));
  const model::ParamStore& store = model.params();
  for (const auto& p : store.params()) {
    AMOR_CHECK(p->value.defined(), "fsdp: parameter '{}' has no value: is the model already sharded?",
               p->name);
    AMOR_CHECK(p->value.device() == comm.device(),
               "fsdp: parameter '{}' is {} but the {} communicator works on {} tensors", p->name,
               p->value.str(), comm.name(), device_name(comm.device()));
  }
  // Sharding from different starting points would train a model no rank ever had.
  const int W = comm.size(), r = comm.rank();
  std::vector<int64_t> hashes(static_cast<size_t>(W), 0);
  hashes[static_cast<size_t>(r)] = static_cast<int64_t>(params_hash(store));
  comm.all_reduce(hashes.data(), W, ReduceOp::Sum);
  for (int q = 1; q < W; ++q)
    AMOR_CHECK(hashes[static_cast<size_t>(q)] == hashes[0],
               "fsdp: rank {}'s initial parameters differ from rank 0's; every rank must build and "
               "initialise the model identically (same config and seed)",
               q);

  units_ = build_flat_units(store, W, r);
  shards_.resize(units_.size());
  for (size_t u = 0; u < units_.size(); ++u) {
    const FlatUnit& fu = units_[u];
    Shard& s = shards_[u];
    const Shape shape{fu.shard_numel};
    s.master = Tensor::zeros(shape, dtype_, comm.device());
    const int64_t lo = static_cast<int64_t>(r) * fu.shard_numel, hi = lo + fu.shard_numel;
    for (const FlatParam& fp : fu.params) {
      const int64_t b = std::max(lo, fp.offset), e = std::min(hi, fp.offset + fp.numel);
      if (b >= e) continue;
      s.master.slice_flat(b - lo, {e - b})
          .copy_from(fp.param->value.view({fp.numel}).slice_flat(b - fp.offset, {e - b}));
    }
  }
  for (const auto& p : store.params()) {
    p->value = Tensor();
    p->grad = Tensor();
  }
  group_ = std::make_unique<CommRunGroup>(comm);
  model.set_run_group(group_.get());
  model.set_unit_hooks(this);
}

Fsdp::~Fsdp() {
  model_.set_unit_hooks(nullptr);
  model_.set_run_group(nullptr);
  if (pending_) {
    try {
      pending_->wait();
    } catch (const Error&) {
      // The communicator is broken and will say so; a destructor cannot throw.
    }
  }
}

int64_t Fsdp::elem_bytes() const { return static_cast<int64_t>(dtype_size(dtype_)); }

Tensor Fsdp::compute_shard(const Shard& s) const {
  return compute_dtype_ == dtype_ ? s.master : cast(s.master, compute_dtype_);
}

void Fsdp::track(int64_t delta) {
  gathered_ += delta;
  peak_gathered_ = std::max(peak_gathered_, gathered_);
}

void Fsdp::check_in_pass(const char* hook, int unit) const {
  AMOR_CHECK(unit >= 0 && unit < static_cast<int>(units_.size()),
             "fsdp: {}({}): the model has units 0..{}", hook, unit, units_.size() - 1);
  AMOR_CHECK(phase_ != Phase::Idle,
             "fsdp: the model called {}(unit '{}') outside Fsdp::forward/backward; run a sharded "
             "model through those",
             hook, units_[static_cast<size_t>(unit)].name);
}

void Fsdp::set_value_views(int unit) {
  const FlatUnit& fu = units_[static_cast<size_t>(unit)];
  const Tensor& full = shards_[static_cast<size_t>(unit)].full;
  for (const FlatParam& fp : fu.params) {
    fp.param->value = full.slice_flat(fp.offset, fp.shape);
    ++fp.param->version;  // a gather may land where the last one did, with other values
  }
}

void Fsdp::clear_value_views(int unit) {
  for (const FlatParam& fp : units_[static_cast<size_t>(unit)].params) fp.param->value = Tensor();
}

void Fsdp::start_prefetch(int unit) {
  if (!opt_.prefetch || pending_) return;
  const int next = phase_ == Phase::Forward ? unit + 1 : phase_ == Phase::Backward ? unit - 1 : -1;
  if (next < 0 || next >= static_cast<int>(units_.size())) return;
  Shard& s = shards_[static_cast<size_t>(next)];
  if (s.full.defined()) return;
  pending_full_ = Tensor::empty({units_[static_cast<size_t>(next)].padded}, compute_dtype_, comm_.device());
  track(static_cast<int64_t>(pending_full_.nbytes()));
  pending_src_ = compute_shard(s);  // alive until the gather completes
  pending_ = comm_.all_gather_start(pending_src_, pending_full_);
  pending_unit_ = next;
  stats_.gathers++;
}

// Completes the prefetch in flight; its unit counts as gathered from now on.
void Fsdp::finish_prefetch() {
  if (!pending_) return;
  pending_->wait();
  pending_.reset();
  pending_src_ = Tensor();
  Shard& s = shards_[static_cast<size_t>(pending_unit_)];
  s.full = std::move(pending_full_);
  pending_full_ = Tensor();
  set_value_views(pending_unit_);
  pending_unit_ = -1;
}

void Fsdp::give_grad_buffer(int unit) {
  Shard& s = shards_[static_cast<size_t>(unit)];
  if (s.full_grad.defined() || s.grad_done) return;
  const FlatUnit& fu = units_[static_cast<size_t>(unit)];
  s.full_grad = Tensor::zeros({fu.padded}, dtype_, comm_.device());
  track(static_cast<int64_t>(s.full_grad.nbytes()));
  for (const FlatParam& fp : fu.params) fp.param->grad = s.full_grad.slice_flat(fp.offset, fp.shape);
}

void Fsdp::gather(int unit) {
  check_in_pass("gather", unit);
  try {
    gather_unit(unit);
  } catch (const Error& e) {
    throw Error(fmt::format("fsdp: gathering unit '{}': {}", units_[static_cast<size_t>(unit)].name, e.what()));
  }
}

void Fsdp::gather_unit(int unit) {
  Shard& s = shards_[static_cast<size_t>(unit)];
  if (!s.full.defined()) {
    if (pending_ && pending_unit_ == unit) {
      stats_.prefetch_hits++;
      finish_prefetch();
    } else {
      if (pending_) {  // a prefetch of another unit: one collective in flight at a time
        stats_.prefetch_wasted++;
        finish_prefetch();
      }
      s.full = Tensor::empty({units_[static_cast<size_t>(unit)].padded}, compute_dtype_, comm_.device());
      track(static_cast<int64_t>(s.full.nbytes()));
      stats_.gathers++;
      comm_.all_gather(compute_shard(s), s.full);
      set_value_views(unit);
    }
  }
  if (phase_ == Phase::Backward) give_grad_buffer(unit);
  start_prefetch(unit);
}

void Fsdp::release(int unit) {
  check_in_pass("release", unit);
  Shard& s = shards_[static_cast<size_t>(unit)];
  if (!s.full.defined()) return;
  track(-static_cast<int64_t>(s.full.nbytes()));
  s.full = Tensor();
  clear_value_views(unit);
}

void Fsdp::grad_ready(int unit) {
  check_in_pass("grad_ready", unit);
  Shard& s = shards_[static_cast<size_t>(unit)];
  const FlatUnit& fu = units_[static_cast<size_t>(unit)];
  AMOR_CHECK(phase_ == Phase::Backward && s.full_grad.defined(),
             "fsdp: grad_ready(unit '{}') {}", fu.name,
             s.grad_done ? "came twice in one backward" : "without a gradient buffer (not in backward)");
  Tensor summed = Tensor::empty({fu.shard_numel}, dtype_, comm_.device());
  try {
    comm_.reduce_scatter(s.full_grad, summed);
  } catch (const Error& e) {
    throw Error(fmt::format("fsdp: reducing the gradient of unit '{}': {}", fu.name, e.what()));
  }
  stats_.reduce_scatters++;
  add_(s.grad, summed);
  track(-static_cast<int64_t>(s.full_grad.nbytes()));
  s.full_grad = Tensor();
  for (const FlatParam& fp : fu.params) fp.param->grad = Tensor();
  s.grad_done = true;
}

void Fsdp::drop_gathered() {
  if (pending_) {
    pending_->wait();
    pending_.reset();
    track(-static_cast<int64_t>(pending_full_.nbytes()));
    pending_full_ = pending_src_ = Tensor();
    pending_unit_ = -1;
  }
  for (size_t u = 0; u < shards_.size(); ++u) {
    Shard& s = shards_[u];
    if (s.full.defined()) track(-static_cast<int64_t>(s.full.nbytes()));
    if (s.full_grad.defined()) track(-static_cast<int64_t>(s.full_grad.nbytes()));
    s.full = s.full_grad = Tensor();
    for (const FlatParam& fp : units_[u].params) fp.param->value = fp.param->grad = Tensor();
  }
}

// A pass ended: a prefetch the model never asked for is completed and dropped.
void Fsdp::end_pass() {
  phase_ = Phase::Idle;
  if (!pending_) return;
  stats_.prefetch_wasted++;
  pending_->wait();
  pending_.reset();
  track(-static_cast<int64_t>(pending_full_.nbytes()));
  pending_full_ = pending_src_ = Tensor();
  pending_unit_ = -1;
}

model::StepOutput Fsdp::forward(const model::Batch& batch, bool training) {
  AMOR_CHECK(phase_ == Phase::Idle, "fsdp: forward called inside another pass");
  phase_ = Phase::Forward;
  try {
    model::StepOutput out = model_.forward(batch, training);
    end_pass();
    return out;
  } catch (...) {
    phase_ = Phase::Idle;
    throw;
  }
}

void Fsdp::backward(const Tensor& dloss) {
  AMOR_CHECK(phase_ == Phase::Idle, "fsdp: backward called inside another pass");
  ensure_training_state();  // once per backward, not in every unit's grad_ready
  phase_ = Phase::Backward;
  try {
    for (size_t u = 0; u < shards_.size(); ++u) {
      shards_[u].grad_done = false;
      // Units the forward left gathered (the embedding) collect gradients from the start.
      if (shards_[u].full.defined()) give_grad_buffer(static_cast<int>(u));
    }
    start_prefetch(static_cast<int>(units_.size()));  // backward begins with the last unit
    model_.backward(dloss);
    end_pass();
  } catch (...) {
    phase_ = Phase::Idle;
    throw;
  }
  for (size_t u = 0; u < shards_.size(); ++u)
    AMOR_CHECK(shards_[u].grad_done,
               "fsdp: backward ended without grad_ready for unit '{}'; its gradient never reached "
               "the shards",
               units_[u].name);
}

void Fsdp::ensure_training_state() {
  for (size_t u = 0; u < shards_.size(); ++u) {
    Shard& s = shards_[u];
    if (s.grad.defined()) continue;
    const Shape shape{units_[u].shard_numel};
    s.exp_avg = Tensor::zeros(shape, dtype_, comm_.device());
    s.exp_avg_sq = Tensor::zeros(shape, dtype_, comm_.device());
    s.grad = Tensor::zeros(shape, dtype_, comm_.device());
  }
}

void Fsdp::zero_grad() {
  ensure_training_state();
  for (Shard& s : shards_) s.grad.zero_();
}

double Fsdp::step(double lr) {
  AMOR_CHECK(phase_ == Phase::Idle, "fsdp: step called inside a forward or backward");
  ensure_training_state();
  std::vector<Tensor> grads;
  for (Shard& s : shards_) grads.push_back(s.grad);
  // Padding is zero in every gradient shard, so the shards' squares sum to the model's.
  const double norm = std::sqrt(comm_.all_reduce_sum(sum_of_squares(grads)));
  drop_gathered();  // stale after the update (or left over from an evaluation forward)
  if (!std::isfinite(norm)) return norm;
  const double coef = clip_coefficient(norm, opt_.max_grad_norm);
  if (coef < 1.0) scale_grads(grads, coef);
  ++opt_step_;
  for (size_t u = 0; u < shards_.size(); ++u) {
    Shard& s = shards_[u];
    for (const ShardSegment& seg : units_[u].segments) {
      const Shape shape{seg.length};
      Tensor p = s.master.slice_flat(seg.begin, shape), g = s.grad.slice_flat(seg.begin, shape);
      Tensor m = s.exp_avg.slice_flat(seg.begin, shape), v = s.exp_avg_sq.slice_flat(seg.begin, shape);
      adamw_step(p, g, m, v, opt_step_, lr, opt_.beta1, opt_.beta2, opt_.eps,
                 seg.weight_decay ? opt_.weight_decay : 0.0);
    }
    // The values changed (a gathered view of a single rank's f32 master may be the master itself).
    for (const FlatParam& fp : units_[u].params) ++fp.param->version;
  }
  return norm;
}

std::vector<std::pair<std::string, Tensor>> Fsdp::full_parameters() {
  AMOR_CHECK(phase_ == Phase::Idle, "fsdp: full_parameters called inside a forward or backward");
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t u = 0; u < units_.size(); ++u) {
    Tensor full = Tensor::empty({units_[u].padded}, dtype_, comm_.device());
    comm_.all_gather(shards_[u].master, full);
    for (const FlatParam& fp : units_[u].params)
      out.emplace_back(fp.name, full.slice_flat(fp.offset, fp.shape).clone());
  }
  return out;
}

FsdpMemory Fsdp::memory() const {
  FsdpMemory m;
  m.world_size = comm_.size();
  for (size_t u = 0; u < units_.size(); ++u) {
    const Shard& s = shards_[u];
    const int64_t shard_bytes = static_cast<int64_t>(s.master.nbytes());
    m.param_bytes += shard_bytes;
    m.grad_bytes += shard_bytes;  // grad and moments: the master's shape and dtype
    m.optimizer_bytes += 2 * shard_bytes;
    m.model_param_bytes += units_[u].numel * elem_bytes();
  }
  m.peak_gathered_bytes = peak_gathered_;
  return m;
}

}  // namespace amor::dist
