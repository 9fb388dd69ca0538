// One AMOR block (arXiv 2602.13215): entropy-gated causal attention refining the residual stream.
// Given the block's normed input hn [B,T,d] and the tied embedding W [V,d]:
//
//   H_t     = -sum_v p_v log p_v / log V,  p = softmax(W hn_t)     detached (no gradient)
//   gate_t  = AmorGate(H)                                           (EMA threshold, amor_gate.h)
//   y       = gate ⊙ O(attn(RoPE(Q hn), RoPE(K hn), V hn))          causal, K,V at every token
//   alpha   = sigmoid(max(raw_alpha, -1))                           per channel, floor ~0.27
//   out     = hn + alpha ⊙ y
//
// The block returns delta = alpha ⊙ y; the model forms out = hn + delta and adds delta to the
// residual stream (h + (out - hn) in the paper's words, without the cancellation). The gate goes
// to the attention (amor_attention.h) as its query gate, so gated-off rows get exactly y = 0
// (out = hn exactly), send no gradient to Q or O, and only firing rows send gradient to the K,V
// they attend to: the numerics of the paper's full_with_mask training. Outside training the
// attention runs sparse (Q, attention and O only at firing rows, K and V everywhere), with the
// same values bitwise on the CPU; set_sparse_inference(false) gives the dense form at inference
// too (a reference). O is zero-initialised, so at step 0 every block is the identity and the
// model equals its backbone.
//
// Activation recomputation (model.recompute): after forward the block keeps only hn, its gate
// and alpha; backward re-runs the attention from them (the gate is not decided again, so the
// EMA thresholds move once per forward as always) and then differentiates.
//
// Parameters (prefix "amor.i"): attn.{q,k,v,o}_proj.weight [d,d] (k,v [Hkv*64,d] with GQA),
// alpha [d] (init 0, no weight decay). The clamp passes gradient where raw_alpha >= -1 (as
// torch.clamp's backward) and none below.
#pragma once
#include <memory>
#include <string>

#include "models/amor/amor_gate.h"
#include "models/amor/amor_attention.h"
#include "models/amor/entropy_router.h"

namespace amor::model {

class AmorBlock {
 public:
  AmorBlock(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);

  // hn [B,T,d]; W the tied embedding [V,d]. Returns delta = alpha ⊙ y.
  Tensor forward(const Tensor& hn, const Tensor& W, bool training);
  // d(delta) -> d(hn) through the attention path (the identity path hn -> out is the caller's).
  Tensor backward(const Tensor& ddelta);

  // Inference over the next T tokens hn [B,T,d] with the block's KV cache: the gate decided from
  // the same entropy as forward with the frozen threshold, the attention sparse
  // (AmorAttention::infer), its delta added to the residual stream h [B,T,d] in the same launch as
  // alpha's scaling (channel_scale_add). Nothing saved; last_projection_rows() counts this call's
  // rows. alpha is computed once and reused while raw_alpha is unchanged (Param::version).
  struct InferOut {
    Tensor h;        // h + delta [B,T,d]; h itself when no row fired (delta would be +0 everywhere)
    Tensor gate;     // u8 [B,T]
    Tensor entropy;  // [B,T]
    double tau = 0;
  };
  InferOut infer(const Tensor& hn, const Tensor& W, KvCache& cache, const Tensor& h);

  AmorGate& gate() { return gate_; }
  const AmorGate& gate() const { return gate_; }
  // What the last forward decided: gate u8 [B,T], entropies [B,T] (hn's dtype), and the gate's
  // state {m, s, tau} f64 [3] after it, on hn's device. last_tau() reads the threshold on the
  // host (a copy back from the GPU: for logging, once per step, not in the forward).
  const Tensor& last_gate() const { return gate_t_; }
  const Tensor& last_entropy() const { return entropy_; }
  const Tensor& last_gate_state() const { return gate_state_; }
  double last_tau() const;
  // The last forward's gated attention output y [B,T,d] (kept for alpha's gradient; undefined
  // after a forward under recomputation, which keeps only hn).
  const Tensor& last_attention() const { return y_; }
  // Rows each projection of the last forward computed (sparse inference: Q and O n_fire only).
  const AmorAttention::Rows& last_projection_rows() const { return attn_.last_rows(); }
  // Inference form of the attention, in forward(training = false) and infer(): sparse (the
  // default, or AMOR_BLOCK_INFERENCE=sparse|dense) or dense masked (a reference in forward; in
  // infer() the form without the gate's read-back, amor_attention.h).
  void set_sparse_inference(bool on) { sparse_inference_ = on; }
  bool sparse_inference() const { return sparse_inference_; }
  // Outside training, gate on router->predict(index, hn) (entropy_router.h) instead of the LM
  // head's entropy (null: the LM head, the default). Training always uses the LM head.
  void set_entropy_router(std::shared_ptr<const EntropyRouter> router, int64_t index) {
    router_ = std::move(router);
    router_index_ = index;
  }
  bool has_entropy_router() const { return router_ != nullptr; }

  Param* raw_alpha;

 private:
  int64_t vocab_chunk_;
  bool recompute_;
  bool sparse_inference_;
  bool sparse_ = false;  // the form the last forward used
  AmorGate gate_;
  AmorAttention attn_;
  Tensor y_, alpha_, gate_t_, entropy_;
  Tensor hn_;  // recompute: the last forward's input
  Tensor gate_state_;
  std::shared_ptr<const EntropyRouter> router_;
  int64_t router_index_ = 0;

  // The gate's input: the LM head's normalised entropy, or (outside training) the router's.
  Tensor gate_entropy(const Tensor& hn, const Tensor& W, bool training, bool inference = false) const;

  Tensor alpha_vector(const Tensor& like) const;  // sigmoid(max(raw, -1)) on like's device

  // infer()'s alpha: alpha_vector(like), recomputed only when this key changes (see the .cpp).
  struct AlphaKey {
    const void* data = nullptr;  // raw_alpha's storage
    uint64_t version = 0;        // raw_alpha->version
    DType dtype = DType::F32;
    Device device = Device::CPU;  // where alpha goes
    bool operator==(const AlphaKey&) const = default;
  };
  const Tensor& inference_alpha(const Tensor& like);
  Tensor infer_alpha_;
  AlphaKey infer_alpha_key_;
  Tensor infer_alpha_raw_;  // cpu: the raw values infer_alpha_ came from (a check, see the .cpp)
};

}  // namespace amor::model
