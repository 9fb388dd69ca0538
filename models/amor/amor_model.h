// The AMOR model (arXiv 2602.13215; the authors' amor.py), config key model.kind = "amor":
//
//   embedding -> [backbone layer] x n_layers -> norm_f -> [AMOR block] x K -> final_norm -> tied head
//
// Backbone layers are the pre-norm mixer + SwiGLU MLP layers of layer.h with the mixer named by
// model.amor.backbone: gdn (G) or mamba2 (M), as in the paper; transformer (A) is also accepted
// as an ablation/debug backbone (attention everywhere, then AMOR blocks on top).
// K = model.amor.blocks is 1 or 3 (the paper's variants). Block i (amor_block.h) reads its normed
// input hn_i and returns delta_i = alpha_i ⊙ gate_i ⊙ O_i(attn_i(hn_i)); where its norm sits
// depends on model.amor.residual_mode:
//
//   classic: h = norm_f(h) enters the residual stream.
//            block 0:   hn = h,          h = hn + delta_0        (no norm of its own)
//            block i>0: hn = norm_i(h),  h = h + delta_i
//   h:       block 0:   hn = norm_f(h),  h = h + delta_0         (norm_f is block 0's pre-norm)
//            block i>0: hn = norm_i(h),  h = h + delta_i
//   then final_norm(h) goes to the tied LM head.
//
// (The paper writes h + (out - hn) with out = hn + delta; adding delta is the same value without
// the cancellation.) With O zero-initialised every delta is exactly 0 at step 0, so the model's
// losses and backbone gradients equal those of its backbone followed by the same norms.
//
// Parameters: embed_tokens.weight [V,d]; layers.i.* (layer.h); norm_f.weight [d];
// amor.i.norm.weight [d] (blocks i >= 1); amor.i.attn.{q,k,v,o}_proj.weight [d,d];
// amor.i.alpha [d]; final_norm.weight [d]. FSDP units: embed, each layer, norm_f, each block,
// final_norm.
//
// The gates' EMA thresholds are model state (amor_gate.h): gate_state()/set_gate_state(), and for
// the runner checkpoint_state() {"amor_gates": [{"m", "s"} per block]} (run_contract.h); the run
// group's gather_flat feeds the gates' cross-rank statistics. forward() fills StepOutput.gates,
// gate_entropy and tau per block (K gate rows). The gates' EMA
// steps stay on the device during the forward; the K thresholds come back to the host in one read
// at its end (forward_done), where the host waits for the losses anyway. Activation
// recomputation (model.recompute) applies to the backbone layers (layer.h) and to each block
// (amor_block.h).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "models/amor/amor_block.h"
#include "models/lm/language_model.h"

namespace amor::model {

class AmorModel final : public LanguageModel {
 public:
  AmorModel(const ModelConfig& cfg, DType dtype);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  const AmorBlock& block(int64_t i) const { return *blocks_.at(static_cast<size_t>(i)); }

  // One (m, s) per block, in block order.
  std::vector<AmorGateState> gate_state() const;
  void set_gate_state(const std::vector<AmorGateState>& state);
  // Plugs the cross-rank gather of the entropies into every block's gate (amor_gate.h).
  void set_entropy_gather(const EntropyGather& gather);

  // The runner's contract (run_contract.h).
  int64_t token_gate_rows() const override { return num_blocks(); }
  std::map<std::string, std::string> checkpoint_state() const override;
  void restore_checkpoint_state(const std::map<std::string, std::string>& saved, bool required) override;
  // The gates gather their entropies over the group (nullptr: this rank's alone).
  void set_run_group(RunGroup* group) override;
  // Outside training the blocks run sparse (Q, attention, O only at firing rows; default) or, as
  // a reference, in the dense masked form of training (amor_attention.h). Same values on the CPU.
  void set_sparse_inference(bool on);
  // The blocks' form (they share it: set_sparse_inference, AMOR_BLOCK_INFERENCE).
  bool sparse_inference() const;
  // Outside training, every block gates on the fitted router's predicted entropy instead of the
  // LM head's (entropy_router.h); null: the LM head again. Checked against the blocks and width.
  void set_entropy_router(std::shared_ptr<const EntropyRouter> router);
  void use_entropy_router(const std::string& path) override;
  // Called in every forward (training or not) and inference call with each block's index, its
  // normed input hn [B,T,d] and the entropy its gate read [B,T] (what fit-router collects).
  using BlockObserver = std::function<void(int64_t block, const Tensor& hn, const Tensor& entropy)>;
  void set_block_observer(BlockObserver observer) { observer_ = std::move(observer); }

 protected:
  Tensor body_forward(const Tensor& h, const Batch& batch, bool training, StepOutput& out) override;
  Tensor body_backward(const Tensor& dh) override;
  std::unique_ptr<InferenceState> new_body_state() const override;
  Tensor body_infer(const Tensor& h, InferenceState& state, StepOutput& out) override;
  std::string body_graph_blocker() const override;
  void forward_done(StepOutput& out) override;

 private:
  bool classic_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<RMSNorm> norm_f_;
  std::vector<std::unique_ptr<RMSNorm>> block_norms_;  // [0] is null: block 0 has no norm of its own
  std::vector<std::unique_ptr<AmorBlock>> blocks_;
  std::unique_ptr<RMSNorm> final_norm_;
  // ParamStore unit of each part, for the parallelism hooks.
  std::vector<int> layer_units_, block_units_;
  int norm_f_unit_ = 0, final_norm_unit_ = 0;
  BlockObserver observer_;
};

// The gates' states as checkpoints keep them: a JSON array of {"m", "s"} per block, doubles
// printed to round-trip exactly.
std::string gate_state_to_json(const std::vector<AmorGateState>& s);
std::vector<AmorGateState> gate_state_from_json(const std::string& text);

// The backbone's mixer letter for model.amor.backbone (gdn G, mamba2 M, transformer A).
char amor_backbone_letter(const ModelConfig& cfg);

}  // namespace amor::model
