// The gated attention of one AMOR block: y = gate ⊙ O(attn(RoPE(Q hn), RoPE(K hn), V hn)),
// causal, MHA or GQA (model.n_kv_heads), head_dim model.head_dim, O zero-initialised.
//
// K and V are computed at every token (they are the memory every firing query reads, and what a
// KV cache holds). Q, attention and O run in one of two forms with exactly the same values:
//
//   dense (training; design §3 "full_with_mask"): Q and O over all rows; the attention op skips
//          the gated-off rows (output exactly 0 there), so O sees zero rows and outputs 0 there;
//   sparse (inference): the firing rows of hn are gathered into [n_fire, d]; Q is projected and
//          rotated (at their own positions) on those rows only and scattered into a zero [B,T,H,hd]
//          query buffer that the gated attention reads only at firing rows; the firing rows of
//          its output are gathered, projected by O ([n_fire, d]) and scattered back into y.
//
// On the CPU Q and O use row_stable_linear (row_ops.h), so the two forms agree bitwise; the
// backward of either form gives the same gradients up to summation order (the sparse one sums
// over the firing rows only). Gated-off rows give Q and O no gradient, and K, V get gradient only
// through the firing rows that attend to them.
//
// Parameters (prefix e.g. "amor.0.attn"), in this order (the init order):
//   q_proj.weight [H hd, d] N(0, init_std), k_proj.weight / v_proj.weight [Hkv hd, d] N(0, init_std),
//   o_proj.weight [d, H hd] zero.
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/infer/kv_cache.h"

namespace amor::model {

class AmorAttention {
 public:
  AmorAttention(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);

  // hn [B,T,d]; gate u8 [B,T] on hn's device. Returns y [B,T,d], exactly 0 at gated-off rows.
  Tensor forward(const Tensor& hn, const Tensor& gate, bool sparse);
  // dy [B,T,d] -> d hn; accumulates the four projections' gradients.
  Tensor backward(const Tensor& dy);
  void drop_saved();
  // Inference over the next T tokens hn [B,T,d] with the block's KV cache: K and V at every
  // token (appended to the cache, rotated at their positions). Sparse (the default): Q, attention
  // and O only at the firing rows of gate u8 [B,T] (read back to the host: they decide the
  // shapes), at positions cache length + t; returns y [B,T,d], or an undefined tensor when no row
  // fires (y would be all zeros: the common decode step, so no zeros are made). Dense: Q and O
  // at every row and the gated attention over all of them (its kernels do no work at gated-off
  // rows, whose output is exactly 0, so O gives 0 there), nothing read back to the host; y
  // always defined, equal as numbers to the sparse form's (bitwise up to the sign of zeros). At a
  // decode step on the GPU (T = 1) the dense form runs on the KV cache's step path (lengths on
  // the device, one attention launch for every sequence, gated-off rows costing nothing:
  // kv_cache.h), so its step can be captured in a CUDA graph (decode_graph.h). There Q, K and V
  // come from one GEMM over the three weights stacked (kept between steps, remade when a weight's
  // storage or version changes), and their RoPE and the append are one launch
  // (KvCache::append_qkv_step): 2 launches where 6-9 were; AMOR_FUSED_QKV_STEP=0 (read once
  // through env_choice) keeps the separate ones. On the cpu (step path on for tests) Q, K and V are
  // the separate projections' values, so both give the host path's bits.
  // Nothing is saved; last_rows() counts this call's rows (not updated by graph replays).
  Tensor infer(const Tensor& hn, const Tensor& gate, KvCache& cache, bool sparse = true);

  // How many rows each projection computed in the last forward (what sparse execution saves).
  struct Rows {
    int64_t q = 0, k = 0, v = 0, o = 0;
  };
  const Rows& last_rows() const { return rows_seen_; }

  // AMOR_FUSED_QKV_STEP read now, through env_choice (unset, "" or 1: the fused dense step, 0: the
  // separate ops, anything else an error naming the variable); infer reads it once per process.
  static bool read_fused_qkv_step_switch();

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double rope_base_;
  Param* q_w_;
  Linear k_, v_;
  Param* o_w_;

  // The dense decode step's [B,T,(H + 2 Hkv) hd] projections: one GEMM over qkv_w_ on the GPU.
  Tensor project_qkv(const Tensor& hn);
  // q, k and v's weights stacked [(H + 2 Hkv) hd, d] on `like`'s device: kept while each weight's
  // storage and version stay those it was made from (param_store.h: every write increments it).
  const Tensor& stacked_qkv_weight(const Tensor& like);
  Tensor qkv_w_;
  std::array<std::pair<const void*, uint64_t>, 3> qkv_w_key_{};

  // Saved by forward for backward.
  bool sparse_ = false;
  std::vector<int64_t> rows_;  // sparse: the firing rows (flat b*T + t)
  Tensor positions_;           // sparse: i64 [1, n_fire], their positions t
  Tensor gate_, q_in_, o_in_;  // the inputs of Q and O (all rows, or the firing rows)
  Tensor qr_, kr_, v4_, attn_o_, lse_;
  Rows rows_seen_;
};

}  // namespace amor::model
