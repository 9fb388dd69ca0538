// AMOR's entropy gate (arXiv 2602.13215; the authors' amor.py EntropyGate): decides, per token,
// whether a block's attention fires, from the normalised entropy H_t in [0,1] of the tied LM
// head applied to the block's normed input (computed by the block; detached, no gradient).
//
//   adaptive:  tau = m + kappa * s        fixed:  tau = m + fixed_offset
//   gate_t    = 1[H_t > tau]
//
// m and s are EMAs (momentum mu) of the micro-batch median and unbiased standard deviation of H:
//   m <- mu*m + (1-mu)*median(H),   s <- mu*s + (1-mu)*std(H)
// with the median of an even count the lower middle value (as torch.median) and s updated only
// in adaptive mode (as the authors' code; fixed mode never reads it). In training, a forward
// FIRST folds its micro-batch into the EMA and THEN gates that same micro-batch with the new tau
// (the authors' order); outside training the EMA is frozen. With fewer than two entropies the
// unbiased std is undefined (torch returns NaN, which would poison s forever): s is then left
// as it is.
//
// The statistics are over the micro-batch of all ranks of a run: before taking them the gate
// hands its local entropies to a gather hook (identity by default; the sharded runner plugs in
// an MPI/NCCL all-gather), so W ranks with micro-batch b see exactly what one rank with W*b sees.
// The EMA itself is kept in double on the host: it is model state that checkpoints save and
// restore (state()/set_state()).
#pragma once
#include <functional>
#include <vector>

#include "kernels/core/tensor.h"
#include "models/core/config.h"

namespace amor::model {

struct AmorGateState {
  double m = 0.3;  // EMA of the batch median of H
  double s = 0.1;  // EMA of the batch standard deviation of H
};

// Gathers the flat entropies of this rank's micro-batch (CPU, f32 or f64) into those of the
// whole run's micro-batch (the same dtype, any order). Collective: every rank calls it once per
// block per training forward, blocks in order.
using EntropyGather = std::function<Tensor(const Tensor& local)>;

struct EntropyStats {
  double median = 0;  // lower middle value for an even count
  double std = 0;     // unbiased; NaN for fewer than two values
};
EntropyStats entropy_stats(const Tensor& values);

struct GateDecision {
  Tensor gate;  // u8, H's shape and device: 1 where attention fires
  double tau = 0;
};

class AmorGate {
 public:
  // Checks the gate's keys of cfg (model.amor.offset_mode, kappa, momentum, m_init, s_init,
  // fixed_offset) and starts the EMA at (m_init, s_init).
  explicit AmorGate(const AmorConfig& cfg);

  // H: the normalised entropies of this rank's micro-batch (any shape, any device).
  GateDecision decide(const Tensor& H, bool training);

  // The threshold the current state gives (what an eval forward uses).
  double tau() const;
  AmorGateState state() const { return state_; }
  void set_state(const AmorGateState& s) { state_ = s; }
  void set_gather(EntropyGather gather) { gather_ = std::move(gather); }

 private:
  bool adaptive_;
  double kappa_, momentum_, fixed_offset_;
  AmorGateState state_;
  EntropyGather gather_;
};

}  // namespace amor::model
