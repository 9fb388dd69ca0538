// FSDP-style sharding (ZeRO-3, design §4) of a LanguageModel over a Communicator.
//
// Each ParamStore unit is a flat unit (flat_unit.h). Rank r of W keeps only its 1/W shard of
// every unit: master weights, AdamW moments and the gradient, in the model's dtype (the master
// dtype: f32, or f64 on the cpu) on the communicator's device. Mixed precision (design §2): with
// FsdpOptions::compute_dtype set (bf16 on cuda), gathers cast the master shard to that dtype
// before the all-gather, so the model computes on bf16 weights, while gradient buffers, the
// reduce-scatter, the norm and AdamW stay in the master dtype (ops add bf16 gradients into the
// f32 buffers). The model's Params own nothing while sharded: the model calls
// the unit hooks (models/core/unit_hooks.h) and
//   gather(u)     all-gathers unit u into a full flat buffer and points each Param::value at its
//                 slice; in backward also gives the unit a zeroed full gradient buffer that the
//                 Params' grads view. It then starts gathering the next unit (u+1 in forward,
//                 u-1 in backward) without waiting: the prefetch, completed by that unit's gather.
//   release(u)    frees the full weights (Param::value becomes undefined). The model keeps the
//                 embedding gathered from the start of forward to the end of backward itself
//                 (the tied LM head and AMOR's gates need it), so no unit is special here.
//   grad_ready(u) reduce-scatters (sums) the unit's full gradient into this rank's gradient shard,
//                 adding to what is there, and frees the full gradient.
// Gradient accumulation therefore reduce-scatters every micro-batch into the shard (as PyTorch
// FSDP does by default): memory stays at 1/W between micro-batches, at one reduce-scatter per
// unit per micro-batch. Loss scaling is the caller's: dloss = 1/(valid tokens of the global
// batch, all ranks and micro-batches) at valid tokens, so the summed shards are the gradient of
// the global mean loss.
//
// step(lr): the global gradient norm from each rank's shard sum of squares, all-reduced in rank
// order (every rank takes the same norm and clip coefficient), global-norm clipping
// (max_grad_norm), then torch-exact AdamW on the shards, segment by segment (weight decay only
// on parameters flagged weight_decay; padding never moves). Gathered copies are dropped after a
// step, so the next gather sees the new weights. A non-finite norm skips the update (the moments,
// weights and step count stay) and is returned for the caller to report.
//
// The model must run through forward()/backward() below (they tell the hooks which pass it is,
// hence which way to prefetch and when gradients need buffers); a gather outside them is an
// error. Every rank must build the model identically (same config and seed): the constructor
// checks that all ranks start from the same parameters. The constructor also gives the model its
// run group over comm (run_group.h; LanguageModel::set_run_group), the one place the runner does:
// e.g. AMOR's gates then gather their entropies over the ranks, so W ranks with b sequences each
// gate like one rank with W*b. Oryx's training modes follow the sample ids a rank's slice carries
// (rank_batch.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/lm/language_model.h"
#include "runner/dist/communicator.h"
#include "runner/dist/flat_unit.h"

namespace amor::dist {

struct FsdpOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // design §4
  double weight_decay = 0.1;                     // on parameters flagged weight_decay (matrices)
  double max_grad_norm = 1.0;                    // global-norm clip
  bool prefetch = true;                          // gather the next unit while this one computes
  // The dtype the model computes in (the gathered weights); unset: the master dtype. bf16 on cuda
  // (f32 masters); f32 over f64 masters is the cpu's way to test the same code path.
  std::optional<DType> compute_dtype;
};

// Bytes held by one rank (design §4's memory report; the runner logs it and writes it to run.h5).
struct FsdpMemory {
  int world_size = 1;
  int64_t param_bytes = 0;          // master weight shards
  int64_t grad_bytes = 0;           // gradient shards
  int64_t optimizer_bytes = 0;      // AdamW first and second moment shards
  int64_t peak_gathered_bytes = 0;  // most bytes of full units (weights, prefetches, full grads)
                                    // alive at once since construction or reset_peak_memory()
  int64_t model_param_bytes = 0;    // the whole model's parameters, unsharded
  std::string str() const;          // one line for the log
};

struct FsdpStats {
  int64_t gathers = 0;          // all-gathers of full units (prefetches included)
  int64_t prefetch_hits = 0;    // gathers served by a prefetch already in flight
  int64_t prefetch_wasted = 0;  // prefetches the model did not ask for next (a unit out of order,
                                // or none before the pass ended): the model's order and the
                                // prefetch's guess disagree
  int64_t reduce_scatters = 0;
};

// What load() found besides the shards: the saved step and world size, and the caller's extra
// metadata (data position, RNG state, AMOR thresholds, config hash: whatever save() was given).
struct FsdpCheckpoint {
  int64_t step = 0;
  int world_size = 0;
  std::map<std::string, std::string> extra;
};

class Fsdp final : public model::UnitHooks {
 public:
  // Collective. Takes the (initialised) model's parameters: copies this rank's shard of each unit
  // into its master and frees every Param's value and grad; installs itself as the unit hooks.
  Fsdp(model::LanguageModel& model, Communicator& comm, FsdpOptions options = {});
  // Detaches the hooks and the run group. The model's Params stay empty: use full_parameters()
  // first to keep the weights.
  ~Fsdp() override;
  Fsdp(const Fsdp&) = delete;
  Fsdp& operator=(const Fsdp&) = delete;

  // The model's forward and backward on this rank's micro-batch, with the hooks active.
  model::StepOutput forward(const model::Batch& batch, bool training);
  void backward(const Tensor& dloss);
  void zero_grad();
  // One optimizer step on the shards; returns the global gradient norm before clipping.
  double step(double lr);

  // Collective: every parameter at full size, in store order (exports, evaluation, tests).
  std::vector<std::pair<std::string, Tensor>> full_parameters();

  // Sharded checkpoints (fsdp_checkpoint.cpp). save is collective: each rank writes its shards and
  // moments to dir/rank-RRRRR-of-WWWWW.safetensors (atomically), then rank 0 writes dir/fsdp.json
  // (the layout, step, optimizer step, extra), which marks the checkpoint complete. dir must be
  // one folder every rank sees. load is collective, at any world size: each rank reads the parts
  // of the saved shards that overlap its own, so the same W restores every bit and another W
  // reshards. Errors name the file and the unit or parameter.
  void save(const std::string& dir, int64_t step, const std::map<std::string, std::string>& extra = {});
  FsdpCheckpoint load(const std::string& dir);

  // What a training step holds (the training state counted whether or not it is allocated yet).
  FsdpMemory memory() const;
  void reset_peak_memory() { peak_gathered_ = gathered_; }
  const FsdpStats& stats() const { return stats_; }
  const std::vector<FlatUnit>& units() const { return units_; }
  int64_t optimizer_step() const { return opt_step_; }
  Communicator& comm() { return comm_; }

  // model::UnitHooks (called by the model, not by users).
  void gather(int unit) override;
  void release(int unit) override;
  void grad_ready(int unit) override;

 private:
  enum class Phase { Idle, Forward, Backward };
  struct Shard {
    // [shard_numel] each; exp_avg, exp_avg_sq and grad (the training state) are allocated, as
    // zeros, by ensure_training_state on first need: an evaluation-only run never holds them
    // (16 B per parameter at f32: a 1.2B model did not fit a 24 GiB machine without this)
    Tensor master, exp_avg, exp_avg_sq, grad;
    Tensor full;                                // gathered weights [padded], or undefined
    Tensor full_grad;                           // backward only [padded], or undefined
    bool grad_done = false;                     // grad_ready seen in this backward
  };

  void ensure_training_state();  // zeros for every shard's grad and moments, once
  void check_in_pass(const char* hook, int unit) const;
  void gather_unit(int unit);
  void set_value_views(int unit);
  void clear_value_views(int unit);
  void start_prefetch(int unit);
  void finish_prefetch();
  void give_grad_buffer(int unit);
  void drop_gathered();  // frees every full buffer (after a step or load; after an error)
  void end_pass();
  void track(int64_t delta_bytes);
  int64_t elem_bytes() const;
  Tensor compute_shard(const Shard& s) const;  // the master shard in the compute dtype

  model::LanguageModel& model_;
  Communicator& comm_;
  FsdpOptions opt_;
  std::vector<FlatUnit> units_;
  std::vector<Shard> shards_;
  DType dtype_;          // masters, moments, gradients
  DType compute_dtype_;  // gathered weights
  Phase phase_ = Phase::Idle;
  int64_t opt_step_ = 0;
  std::unique_ptr<PendingCollective> pending_;
  int pending_unit_ = -1;
  Tensor pending_full_;
  Tensor pending_src_;  // the compute-dtype copy of the shard a prefetch reads from
  int64_t gathered_ = 0, peak_gathered_ = 0;
  FsdpStats stats_;
  std::unique_ptr<model::RunGroup> group_;  // given to the model; outlives its use (destructor)
};

}  // namespace amor::dist
