// A causal language model: tied embedding -> body -> tied LM head fused with the loss.
//
// forward() runs a batch and keeps what backward() needs; backward(dloss) takes the gradient of
// the objective with respect to every token's loss (1/n_valid at valid tokens for the mean loss;
// any weights for a gradient check) and accumulates every parameter's gradient.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "kernels/lm_head_loss/lm_head_argmax.h"
#include "models/core/config.h"
#include "models/core/layer.h"
#include "models/core/param_store.h"
#include "models/core/unit_hooks.h"
#include "models/lm/run_contract.h"

namespace amor::model {

struct Batch {
  Tensor tokens;      // i32 [B,T]
  Tensor targets;     // i32 [B,T]; -100 = no loss at this position
  // i64 [B]: each sequence's global index in the data order (the loader's), so that whatever is
  // random per sequence (Oryx's training modes) depends on the sequence, not on which rank or
  // micro-batch it landed in: W ranks then compute exactly what one rank does, before and after
  // a resume. Undefined: sequences are numbered by a counter that forward() advances.
  Tensor sample_ids;
  // Oryx outside training: u8 [B,T] modes (1 = attention) used instead of model.oryx.schedule's,
  // e.g. those of a decode whose prefill was shorter than T (prefill_linear_decode_attention).
  // Undefined: the schedule, with the whole sequence as prefill.
  Tensor modes;
};

// A model's inference state for B sequences (models/infer/): every layer's mixer cache and, for
// AMOR, every block's KV cache. Made by LanguageModel::new_inference_state, advanced by
// LanguageModel::infer. The sequences of one state stand at one position; sequences prefilled
// apart and joined (LanguageModel::join_inference_states) keep their own.
struct InferenceState {
  virtual ~InferenceState() = default;
  int64_t batch = 0;
  // Per sequence: the tokens it has been given, and how many of them were prefill (Oryx
  // prefill_linear_decode_attention: tokens t < prefill_lens[b] run linear).
  std::vector<int64_t> lengths, prefill_lens;
  // Whether every sequence stands at the same position, and that position (an error otherwise).
  bool uniform() const;
  int64_t length() const;
  // Every sequence has been given T more tokens (infer() counts them), or will be given T more of
  // prefill (InferenceSession::prefill counts them first: the modes of those tokens read it).
  void advance(int64_t T);
  void add_prefill(int64_t T);
  // other's sequences join this state after its own (the body's caches and the positions);
  // other was made by the same model and is left empty.
  void append_rows(InferenceState& other);
  // Every sequence will hold at most `tokens` tokens (KvCache::reserve_tokens for each cache).
  virtual void reserve_tokens(int64_t tokens) = 0;
  // Every KV cache of the state (its layers', AMOR's blocks'), appended to `out` in a fixed order.
  virtual void kv_caches(std::vector<KvCache*>& out) = 0;
  // For CUDA graphs of decode steps (models/infer/decode_graph.h): what a captured step reads at
  // fixed addresses (KvCache::graph_signature of every KV cache, in order: a replay is valid only
  // while it is unchanged), and whether every KV cache can take T more tokens per sequence
  // without regrowing (true for a state without KV caches).
  std::vector<uintptr_t> graph_signature();
  bool kv_room(int64_t T);

 protected:
  virtual void append_body_rows(InferenceState& other) = 0;
};

// What a forward gives back. Besides the losses: per-token gate decisions (token_gate_rows() of
// them; AMOR's blocks) and mixer modes (when takes_modes(); Oryx), which the runner records
// without knowing which model made them (run_contract.h).
struct StepOutput {
  Tensor token_loss;  // [B,T], 0 where the target is ignored
  Tensor entropy;     // [B,T] normalised entropy H/log V of the final prediction (no gradient)
  double loss_sum = 0;
  int64_t n_valid = 0;
  std::vector<Tensor> gates;          // one u8 [B,T] per gate row (AMOR: per block)
  std::vector<Tensor> gate_entropy;   // one [B,T] per gate row (the gate's input; AMOR's H)
  std::vector<double> tau;            // the threshold each gate row used
  Tensor modes;                       // u8 [B,T], the mixer each token used (Oryx: 1 = attention)
  Tensor predictions;                 // outside training: i32 [B,T], the greedy next token
  double mean_loss() const { return n_valid ? loss_sum / static_cast<double>(n_valid) : 0.0; }
  // Every tensor above on the host (what the runner reads), whichever of them this kind fills.
  void to_host();
};

class LanguageModel {
 public:
  LanguageModel(const ModelConfig& cfg, DType dtype);
  virtual ~LanguageModel() = default;

  StepOutput forward(const Batch& batch, bool training);
  void backward(const Tensor& dloss);

  // Inference (models/infer/, README "Inference"): runs the next T tokens i32 [B,T] of the state's
  // B sequences, continuing from and advancing the state; the StepOutput is forward(training =
  // false)'s for those T positions (token_loss against targets i32 [B,T], -100 or undefined = no
  // target; entropy; predictions; AMOR gates, gate entropies and tau; Oryx modes). AMOR gates use
  // the frozen thresholds. The unit hooks are called around each unit as in forward().
  // exclude_next: ids never predicted at each sequence's last position (the token a greedy
  // generation feeds back next; greedy_generate's min_new_tokens): that prediction is the argmax
  // over the other ids (lm_head_argmax's `excluded`); every other position keeps the plain one.
  std::unique_ptr<InferenceState> new_inference_state(int64_t batch) const;
  // The states' sequences as one state, in order, each at its own position (greedy_generate
  // prefills prompts of different lengths apart, then decodes them together). Each part was made
  // by this model; the parts are consumed.
  std::unique_ptr<InferenceState> join_inference_states(
      std::vector<std::unique_ptr<InferenceState>> parts) const;
  StepOutput infer(const Tensor& tokens, const Tensor& targets, InferenceState& state,
                   std::span<const int32_t> exclude_next = {});

  // ---- CUDA graphs of decode steps (models/infer/decode_graph.h, README "Inference").
  // Why a decode step of this model cannot be captured as a CUDA graph; "" when it can (a
  // recurrent stack on the GPU: mamba2, gdn, serial without attention layers).
  std::string decode_graph_blocker() const;
  // infer() of tokens i32 [B,T] already on the model's device, without targets: device work only
  // (nothing copied to or from the host, no synchronisation), so that stream capture can record
  // it. exclude_next (optional; made for this model's vocab and device, e.g. by
  // exclusion_for()) is infer()'s, already on the device: the prediction at each sequence's last
  // position skips its ids. infer() runs this too when it has no targets, so an eager step and a
  // replayed one run the same kernels on the same inputs. Leaves state's lengths alone (infer()
  // advances them; after a replay, replayed_step() does).
  StepOutput infer_on_device(const Tensor& tokens, InferenceState& state,
                             const ArgmaxExclusion& exclude_next = ArgmaxExclusion());
  // exclude_next's ids prepared for infer_on_device (checked, sorted without repeats, uploaded to
  // the model's device once).
  ArgmaxExclusion exclusion_for(std::span<const int32_t> exclude_next) const;
  // The host-side bookkeeping of T tokens whose step a graph replay ran: the state's lengths and
  // every KV cache's host lengths (KvCache::replayed; the replay advanced their device lengths)
  // advance as infer() would have advanced them.
  void replayed_step(InferenceState& state, int64_t T);

  ParamStore& params() { return params_; }
  const ModelConfig& config() const { return cfg_; }
  // Parallelism wraps the model through these (nullptr: none); see models/core/unit_hooks.h.
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }

  // ---- What the runner needs (run_contract.h); the runner calls only these, never a kind.
  // Rows of StepOutput::gates; 0: no gates.
  virtual int64_t token_gate_rows() const { return 0; }
  // The per-token columns of run.h5's /tokens/<set> this model adds, and a forward's values of
  // them: every column's rows in order (token_row_count), each u8 [B,T] on any device, undefined
  // for zeros. Default: mode [total] from StepOutput::modes and gate [K, total] (root attribute
  // amor_blocks = K) from ::gates, which every run.h5 carries (zeros and K = 0 without them).
  virtual std::vector<TokenColumn> token_columns() const;
  virtual std::vector<Tensor> token_rows(const StepOutput& out) const;
  // Whether Batch::modes steers the model and StepOutput::modes reports its mixers.
  virtual bool takes_modes() const { return false; }
  // The /train columns this model adds, in order, and the accumulator that fills them. Default:
  // the entropy-gate columns fire_rate, tau [n] and block_fire_rate, block_tau [n, K] from
  // StepOutput::gates and ::tau (NaN and [n, 0] without gates), which every run.h5 carries.
  virtual std::vector<MetricColumn> metric_columns() const;
  virtual std::unique_ptr<StepMetrics> new_step_metrics() const;
  // Scalars of the metric row shown in the progress line and reported as evaluation and final
  // metrics (default: the kind's, model_kinds.h: fire_rate, labelled "fire"; skipped while NaN).
  // The sweep summary and index.csv show the kind's list only (they build no model).
  virtual std::vector<SummaryMetric> summary_metrics() const;
  // State beyond the parameters that a checkpoint keeps, as named strings in its metadata, and
  // its restore: `required` (a resume) makes a missing name an error; otherwise (weights from
  // another run's checkpoint) what is missing keeps its initial value. Also copies the state to
  // an evaluation replica. Names must not collide with the runner's (data_position,
  // tokens_seen, config_hash).
  virtual std::map<std::string, std::string> checkpoint_state() const { return {}; }
  virtual void restore_checkpoint_state(const std::map<std::string, std::string>& /*saved*/,
                                        bool /*required*/) {}
  // The collectives of the ranks that run this model together (nullptr: this process alone).
  // Kept until replaced; the caller keeps `group` alive meanwhile.
  virtual void set_run_group(RunGroup* /*group*/) {}
  // The run's seed (train.seed) for whatever the model draws while training.
  virtual void set_run_seed(uint64_t /*seed*/) {}
  // Outside training, gate on the fitted router in this file (eval.router; AMOR:
  // models/amor/entropy_router.h) instead of the LM head. Default: the kind has no such gates.
  virtual void use_entropy_router(const std::string& path);

 protected:
  // The part between the embedding and the LM head; h is [B,T,d].
  virtual Tensor body_forward(const Tensor& h, const Batch& batch, bool training, StepOutput& out) = 0;
  virtual Tensor body_backward(const Tensor& dh) = 0;
  // Inference of the body (the default: this kind has none).
  virtual std::unique_ptr<InferenceState> new_body_state() const;
  virtual Tensor body_infer(const Tensor& h, InferenceState& state, StepOutput& out);
  // Why body_infer's decode step cannot be captured (default: the kind was not checked for it).
  virtual std::string body_graph_blocker() const;
  // The end of forward(), after the losses were copied to the host (the GPU stream has drained):
  // where a model reads device results into StepOutput's host fields without a sync of its own.
  virtual void forward_done(StepOutput&) {}
  Param* embedding() const { return embed_; }
  void gather(int unit) {
    if (hooks_) hooks_->gather(unit);
  }
  void release(int unit) {
    if (hooks_) hooks_->release(unit);
  }
  void grad_ready(int unit) {
    if (hooks_) hooks_->grad_ready(unit);
  }
  // A stack of layers, each its own parameter unit, with the unit hooks around each layer.
  Tensor layers_forward(std::vector<std::unique_ptr<Layer>>& layers, const std::vector<int>& units,
                        Tensor h, const MixerContext& ctx);
  Tensor layers_backward(std::vector<std::unique_ptr<Layer>>& layers, const std::vector<int>& units,
                         Tensor dh);
  Tensor layers_infer(std::vector<std::unique_ptr<Layer>>& layers, const std::vector<int>& units,
                      Tensor h, const MixerContext& ctx,
                      std::vector<std::unique_ptr<MixerCache>>& caches);

  ModelConfig cfg_;
  ParamStore params_;
  UnitHooks* hooks_ = nullptr;

 private:
  Param* embed_;
  Tensor tokens_, targets_, h_final_, lse_;
};

// transformer, mamba2, gdn, serial, fused and oryx: N layers from a pattern, then norm_f. Oryx layers
// get one mode per token for the whole stack (design §3): drawn per 128-token chunk in training
// from the model's own RNG (model state, checkpointed), from the schedule at inference.
class StackModel final : public LanguageModel {
 public:
  StackModel(const ModelConfig& cfg, DType dtype);
  // Oryx: the seed that, with a sequence's sample id, draws its training modes.
  void set_mode_seed(uint64_t seed) { mode_seed_ = seed; }
  // The run's seed, mixed with "oryx" so the modes' stream differs from the weights' init.
  void set_run_seed(uint64_t seed) override { set_mode_seed(seed ^ 0x6f727978ull); }
  bool takes_modes() const override;

 protected:
  Tensor body_forward(const Tensor& h, const Batch& batch, bool training, StepOutput& out) override;
  Tensor body_backward(const Tensor& dh) override;
  std::unique_ptr<InferenceState> new_body_state() const override;
  Tensor body_infer(const Tensor& h, InferenceState& state, StepOutput& out) override;
  std::string body_graph_blocker() const override;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int> layer_units_;
  std::unique_ptr<RMSNorm> norm_f_;
  int norm_f_unit_ = 0;
  uint64_t mode_seed_ = 0x6f727978;  // "oryx"
  int64_t next_sample_id_ = 0;        // for batches without sample ids
};

// The layer letters of a stack model: transformer "AAA..", mamba2 "MMM..", gdn "GGG..", serial
// its pattern repeated to n_layers (which must be a multiple of the pattern's length).
std::string layer_pattern(const ModelConfig& cfg);

std::unique_ptr<LanguageModel> build_model(const ModelConfig& cfg, DType dtype);

}  // namespace amor::model
