// The linear-mixer half of an Oryx layer: what turns the shared keys/values and the linear query
// into the linear mixer's per-head output, with the mixer's own small parameters. The projections
// and short convs of q, k, v belong to OryxMixer; a path gets their outputs, per head.
//
//   Oryx-TG, "gdn" (Gated DeltaNet, as fla's GatedDeltaNet layer):
//     q' = l2norm(q), k' = l2norm(k) per head (eps 1e-6)
//     beta = sigmoid(b_proj x)                                  [B,T,H]
//     g    = -exp(A_log) * softplus(a_proj x + dt_bias)         [B,T,H]
//     o    = gated_delta(q', k', v, g, beta, scale 1/sqrt(head_dim))
//   Oryx-TM, "mamba2" (Mamba2's SSD with one B/C group per head):
//     dt = softplus(dt_proj x + dt_bias), A = -exp(A_log)       [B,T,H], [H]
//     o  = ssd(x = v, dt, A, B = k, C = q, D)                   (P = N = head_dim, G = H)
//
// Parameters (prefix = the mixer's), H = d / head_dim:
//   gdn:    a_proj.weight [H,d], b_proj.weight [H,d], A_log [H], dt_bias [H]
//   mamba2: dt_proj.weight [H,d], A_log [H], dt_bias [H], D [H]
// Inits follow the single-mixer models (design §3) from cfg.gdn / cfg.mamba2:
// A_log = log(U[a_min, a_max]); dt_bias = softplus^-1(dt), dt log-uniform in [dt_min, dt_max]
// floored at dt_floor; D = 1; projections N(0, init_std). A_log, dt_bias, D: no weight decay.
#pragma once
#include <memory>
#include <string>

#include "models/core/config.h"
#include "models/core/layers.h"

namespace amor::model {

class OryxLinearPath {
 public:
  virtual ~OryxLinearPath() = default;
  // x [B,T,d] the mixer's input; q, k, v [B,T,H,hd] after their short convs. Returns o [B,T,H,hd].
  // training: on the GPU the scan keeps its intermediates for backward (unless
  // AMOR_SSD_RECOMPUTE / AMOR_GDN_RECOMPUTE say recompute), as the Mamba2 and GDN mixers do.
  virtual Tensor forward(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                         bool training) = 0;
  struct Grads {
    Tensor dx, dq, dk, dv;
  };
  // do_ [B,T,H,hd]; accumulates the path's parameter gradients.
  virtual Grads backward(const Tensor& do_) = 0;
  // Frees what forward saved (activation recomputation); backward does it too.
  virtual void drop_saved() = 0;
  // Inference: forward's value, nothing saved, the scan continuing from state (undefined = none
  // yet; gdn [B,H,hd,hd], mamba2 [B,H,hd,hd]) and left at the last token's.
  virtual Tensor infer(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                       Tensor& state) const = 0;
};

// cfg.oryx.linear picks the path ("gdn" or "mamba2").
std::unique_ptr<OryxLinearPath> make_oryx_linear_path(ParamStore& ps, const std::string& prefix,
                                                      const ModelConfig& cfg);

class OryxGdnPath final : public OryxLinearPath {
 public:
  OryxGdnPath(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);
  Tensor forward(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                 bool training) override;
  Grads backward(const Tensor& do_) override;
  void drop_saved() override;
  Tensor infer(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
               Tensor& state) const override;

 private:
  int64_t heads_, chunk_;
  double scale_;
  Linear a_, b_;
  Param *A_log_, *dt_bias_;
  Tensor q_, k_, qn_, kn_, q_rstd_, k_rstd_, v_, a_pre_, sp_, decay_, g_, beta_, scan_saved_;
};

class OryxMamba2Path final : public OryxLinearPath {
 public:
  OryxMamba2Path(ParamStore& ps, const std::string& prefix, const ModelConfig& cfg);
  Tensor forward(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
                 bool training) override;
  Grads backward(const Tensor& do_) override;
  void drop_saved() override;
  Tensor infer(const Tensor& x, const Tensor& q, const Tensor& k, const Tensor& v,
               Tensor& state) const override;

 private:
  int64_t heads_, chunk_;
  Linear dt_proj_;
  Param *A_log_, *dt_bias_, *D_;
  Tensor q_, k_, v_, dt_pre_, dt_, A_, scan_saved_;
};

}  // namespace amor::model
