// Oryx's multi-mixer (arXiv 2605.28769, design §3 "oryx"): one layer holds softmax attention and
// one linear mixer (cfg.oryx.linear: gdn = Oryx-TG, mamba2 = Oryx-TM) over shared projections, and
// every token's output comes from the mixer its mode names (MixerContext::modes, u8 [B,T],
// 1 = attention, 0 = linear). H = d / head_dim heads of head_dim (64) for both mixers.
//
//   k = conv(W_K x), v = conv(W_V x)                short causal depthwise convs (k=4, no bias);
//                                                  SiLU after them for gdn, none for mamba2
//   attention:  q_a = W_Q^attn x;  o_a = softmax_attn(rope(q_a), rope(k), v), scale 1/sqrt(hd)
//   linear:     q_l = conv(W_Q^lin x) (its own conv, same activation as k, v)
//               o_l = the linear path on (q_l, k, v)   (oryx_linear_paths.h)
//   o_t = mode_t ? o_a,t : o_l,t
//   y   = W_O · gatedRMSNorm(o, silu(W_G x))       per head, one [hd] weight shared by the heads,
//                                                  normalised before the gate, eps = model.norm_eps
//
// Both memories see every token: attention's keys/values and the recurrence run over all tokens;
// only the query side is per mode. Attention runs with the modes as its query gate (no work and
// exactly zero output at linear rows); the linear mixer's output is masked to linear rows. So
// W_Q^attn gets gradient only through attention rows, W_Q^lin and the linear path's parameters
// only through linear rows, and the shared parameters through both. A forward whose modes have no
// attention row skips attention, one with no linear row skips the linear mixer (both exact).
//
// Choices the paper leaves open (defaults here; fixed until config.h grows keys for them):
//   - the linear query has its own short conv + the path's activation, as the single-mixer GDN
//     (conv on q) and Mamba2 (conv on C) have;
//   - RoPE only on attention's q and k; the linear mixer reads the un-rotated k;
//   - gdn L2-normalises its q and k (inside its path) as Gated DeltaNet must for a stable delta
//     rule; attention reads the un-normalised k; mamba2 uses k, q as B, C unnormalised;
//   - the conv kernel length is the linear kind's (model.gdn.conv_kernel or
//     model.mamba2.conv_kernel), its scan chunk likewise (model.gdn.chunk or model.mamba2.chunk),
//     and the dt / A_log inits come from model.gdn.* or model.mamba2.*;
//   - conv weights init as PyTorch's Conv1d default, U(+-1/sqrt(kernel)).
//
// Parameters (prefix e.g. "layers.3.mixer"; d = model width, K = conv kernel):
//   shared:    k_proj.weight [d,d], v_proj.weight [d,d], k_conv1d.weight [d,K],
//              v_conv1d.weight [d,K], g_proj.weight [d,d], o_norm.weight [hd], o_proj.weight [d,d]
//   attention: q_attn_proj.weight [d,d]
//   linear:    q_lin_proj.weight [d,d], q_lin_conv1d.weight [d,K], and the path's
//              (oryx_linear_paths.h)
// in this order (the order of initialisation from the model's seed).
#pragma once
#include <memory>
#include <string>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/core/mixer.h"
#include "models/oryx/oryx_linear_paths.h"

namespace amor::model {

class OryxMixer final : public Mixer {
 public:
  OryxMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);
  // ctx.modes is required: u8 [B,T] (any device).
  Tensor forward(const Tensor& x, const MixerContext& ctx) override;
  Tensor backward(const Tensor& dy) override;
  void drop_saved() override;
  // Cache: the KV cache (rotated keys, values), the short-conv states of k, v and the linear
  // query, and the linear path's scan state, all advanced at every token whatever its mode, so
  // either mixer can take over at any token. ctx.modes u8 [B,T] names the mixer of the T tokens.
  std::unique_ptr<MixerCache> new_cache() const override;
  Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) override;

 private:
  int64_t heads_, head_dim_, kernel_;
  double rope_base_, eps_;
  bool conv_silu_;
  Linear q_attn_, q_lin_, k_, v_, g_;
  Param *q_lin_conv_, *k_conv_, *v_conv_;
  std::unique_ptr<OryxLinearPath> lin_;
  Param* o_norm_;
  Linear o_;
  // Saved by forward for backward.
  Tensor modes_, lin_mask_, ql_pre_, k_pre_, v_pre_, qa_rot_, k_rot_, kc_, vc_, attn_o_, lse_,
      o_mix_, z_, rstd_;
  bool any_attention_ = false, any_linear_ = false;
};

// Whether a parameter of an oryx model belongs to one mixer only (W_Q^attn, W_Q^lin, the linear
// query's conv and the linear path's own parameters); everything else (embedding, norms, MLPs,
// W_K, W_V, their convs, W_G, the output norm, W_O) is used whatever the mode and counts as shared.
bool oryx_param_is_mixer_specific(const std::string& name);

// The fraction of the store's parameters (by element count) that are shared between the mixers.
double oryx_shared_fraction(const ParamStore& ps);

}  // namespace amor::model
