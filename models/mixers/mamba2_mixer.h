// Mamba2 mixer (design §3; as state-spaces/mamba's Mamba2 and the HF Mamba2Mixer).
//
// With d_inner = expand*d, H = d_inner/P heads of dim P, G groups of state size N and
// conv_dim = d_inner + 2GN, for x [B,T,d]:
//
//   [z | xBC | dt] = x W_in^T               W_in [2 d_inner + 2GN + H, d], rows in that order
//   xBC = silu(conv1d(xBC) + conv_bias)     causal depthwise, kernel K; split [x | B | C]
//   dt  = softplus(dt + dt_bias)            [B,T,H]
//   A   = -exp(A_log)                       [H]
//   y   = SSD(x [B,T,H,P], dt, A, B [B,T,G,N], C, D):
//           h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t
//   y   = rmsnorm_group(y * silu(z)) * norm_w    groups of d_inner/G channels, eps = norm_eps
//   out = y W_out^T                          W_out [d, d_inner]
//
// in_proj and the conv are run per part (z, x, B, C, dt) on contiguous row-views of their weights
// rather than as one GEMM followed by a column split: rows of a row-major weight are contiguous, so
// each part is an ordinary op on an ordinary tensor and no split/concat op is needed on any backend.
// A depthwise conv is per channel, so convolving x, B and C separately is exactly the same conv.
//
// Parameters (prefix + "."):
//   in_proj.weight [2 d_inner + 2GN + H, d], conv1d.weight [conv_dim, K], conv1d.bias [conv_dim],
//   dt_bias [H], A_log [H], D [H], norm.weight [d_inner], out_proj.weight [d, d_inner].
// Init (model.mamba2.init), mamba_ssm: projections N(0, init_std); conv as PyTorch's Conv1d
// default, U(-1/sqrt(K), 1/sqrt(K)) for weight and bias; A_log = log(U[a_min, a_max]);
// dt_bias = softplus^-1(dt), dt = max(exp(U[log dt_min, log dt_max]), dt_floor); D = 1; norm = 1.
// hf (transformers' Mamba2 as the AMOR authors use it, models/README.md): the same except
// A_log = log(1, 2, ..., H).
// Weight decay only on in_proj, conv1d.weight and out_proj.
#pragma once
#include <string>

#include "models/core/config.h"
#include "models/core/layers.h"
#include "models/core/mixer.h"

namespace amor::model {

class Mamba2Mixer final : public Mixer {
 public:
  // Throws amor::Error naming the offending `model.mamba2.*` key for an impossible config.
  Mamba2Mixer(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);
  Tensor forward(const Tensor& x, const MixerContext& ctx) override;
  Tensor backward(const Tensor& dy) override;
  void drop_saved() override;
  // Cache: the conv states of x, B, C (their last K-1 inputs) and the SSD state [B,H,P,N].
  std::unique_ptr<MixerCache> new_cache() const override;
  Tensor infer(const Tensor& x, const MixerContext& ctx, MixerCache& cache) override;

  int64_t d_inner() const { return d_inner_; }
  int64_t heads() const { return heads_; }

 private:
  // The parts of in_proj's output, in row order of its weight.
  enum Part { kZ, kX, kB, kC, kDt, kParts };
  Tensor in_weight(Part p) const;          // row-view of in_proj.weight
  Tensor conv_weight(Part p) const;        // row-view of conv1d.weight (p in kX..kC)
  Tensor conv_bias(Part p) const;
  int64_t part_offset(Part p) const;       // first row of part p in in_proj.weight
  int64_t part_rows(Part p) const;
  Tensor neg_exp_a_log() const;            // A = -exp(A_log) on the parameters' device

  int64_t d_model_, d_inner_, heads_, head_dim_, groups_, d_state_, conv_kernel_, chunk_;
  double eps_;
  Param *in_proj_, *conv_w_, *conv_b_, *dt_bias_, *a_log_, *d_skip_, *norm_w_;
  Linear out_proj_;

  // Saved by forward for backward.
  Tensor x_in_;                            // mixer input [B,T,d]
  Tensor pre_[kParts];                     // in_proj outputs: z, conv inputs x/B/C, raw dt
  Tensor post_[kParts];                    // conv outputs x/B/C (SSD inputs), dt after softplus
  Tensor a_, ssd_y_, rstd_;
  Tensor ssd_saved_;                       // the GPU scan's intermediates for backward (training)
};

}  // namespace amor::model
