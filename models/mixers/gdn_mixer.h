// Gated DeltaNet mixer (Yang et al. 2024; as flash-linear-attention's GatedDeltaNet layer with
// use_gate=True, use_short_conv=True). With H = round(qk_ratio d / K) heads of key dim K and value
// dim V = v_expand K, conv1d causal depthwise (kernel conv_kernel, no bias):
//   q = l2norm_head(silu(conv1d(q_proj x)))      [B,T,H,K]   (l2norm eps 1e-6)
//   k = l2norm_head(silu(conv1d(k_proj x)))      [B,T,H,K]
//   v = silu(conv1d(v_proj x))                   [B,T,H,V]
//   beta = sigmoid(b_proj x)                     [B,T,H]
//   g = -exp(A_log) * softplus(a_proj x + dt_bias)   [B,T,H]   (log decay per step)
//   o = gated_delta(q, k, v, g, beta, scale 1/sqrt(K))   per head, state S [K,V] from zero:
//       S <- exp(g_t) S;  S <- S + k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T q_t / sqrt(K)
//   y = o_proj(rmsnorm_head(o) * o_norm.weight * silu(g_proj x))   (per head over V, eps norm_eps)
// Parameters (prefix + "."): q_proj/k_proj.weight [H K, d], v_proj/g_proj.weight [H V, d],
// a_proj/b_proj.weight [H, d], o_proj.weight [d, H V], q_conv1d/k_conv1d.weight [H K, Kc],
// v_conv1d.weight [H V, Kc], A_log [H], dt_bias [H], o_norm.weight [V].
// Init as fla's layer: projections N(0, init_std), A_log = log U[a_min, a_max], dt_bias as
// Mamba2's, o_norm 1; the short convs by model.gdn.init (fla_layer: PyTorch's default,
// fla_model: N(0, init_std); gdn_mixer.cpp, models/README.md).
// cfg.gdn.chunk = 0 runs the scan as the step-by-step recurrence (a reference; same function).
#pragma once
#include <string>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/core/mixer.h"

namespace amor::model {

// The mixer's head layout from cfg.d_model and cfg.gdn; throws amor::Error naming the offending
// model.gdn.* key when the config cannot describe a mixer.
struct GdnDims {
  int64_t heads, head_k, head_v;  // H, K, V
};
GdnDims gdn_dims(const ModelConfig& cfg);

class GdnMixer final : public Mixer {
 public:
  GdnMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);
  Tensor forward(const Tensor& x, const MixerContext& ctx) override;
  Tensor backward(const Tensor& dy) override;
  void drop_saved() override;
  // Cache: the conv states of q, k, v (their last K-1 inputs) and the delta-rule state [B,H,K,V].
  std::unique_ptr<MixerCache> new_cache() const override;
  Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) override;

  int64_t heads() const { return heads_; }
  int64_t head_k_dim() const { return head_k_; }  // K
  int64_t head_v_dim() const { return head_v_; }  // V

 private:
  GdnMixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg, const GdnDims& dims);

  // One of the q/k/v branches: projection, then causal depthwise conv with SiLU.
  struct ConvBranch {
    ConvBranch(ParamStore& ps, const std::string& prefix, const std::string& name, int64_t d,
               int64_t channels, const ModelConfig& cfg);
    Tensor forward(const Tensor& x);    // [B,T,channels]
    Tensor backward(const Tensor& dy);  // -> dx [B,T,d]
    void drop_saved();
    Linear proj;
    Param* conv_w;
    Tensor pre_conv_;  // the conv's input (its backward recomputes the rest)
  };

  int64_t heads_, head_k_, head_v_, chunk_;
  double norm_eps_;
  ConvBranch q_, k_, v_;
  Linear a_, b_, gate_, o_;
  Param* a_log_;
  Param* dt_bias_;
  Param* o_norm_w_;

  // Saved by forward for backward.
  Tensor qc_, q_rstd_, kc_, k_rstd_;  // conv outputs of q, k [B,T,H,K] and their l2norm rstd
  Tensor qn_, kn_, v4_;               // the scan's q, k, v
  Tensor a_in_, dt_, neg_a_;          // a_proj x, softplus(a_proj x + dt_bias), -exp(A_log)
  Tensor g_, beta_;                   // the scan's log decay and beta
  Tensor scan_o_, z_, norm_rstd_;     // scan output, gate g_proj x [B,T,H,V], gated-norm rstd
  Tensor scan_saved_;                 // the GPU scan's intermediates for backward (training)
};

}  // namespace amor::model
