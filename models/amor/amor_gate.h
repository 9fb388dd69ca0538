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
//
// Where it runs: on the device of H (kernels/amor_gate: the cpu reference, or the CUDA kernels).
// The EMA is model state in double (checkpoints save and restore it: state()/set_state()) and
// lives as an f64 {m, s, tau} vector on the device the gate last ran on, so a training forward on
// the GPU gathers, takes the statistics, steps the EMA and gates without any host round trip.
// Reading it on the host (state(), tau(), GateDecision::tau()) is an explicit copy back, meant
// for checkpoints and logging; the host copy is kept until the next training step changes the
// state, so an evaluation reads it once, not per forward.
#pragma once
#include <functional>
#include <vector>

#include "kernels/amor_gate/amor_gate.h"
#include "kernels/core/tensor.h"
#include "models/core/config.h"

namespace amor::model {

struct AmorGateState {
  double m = 0.3;  // EMA of the batch median of H
  double s = 0.1;  // EMA of the batch standard deviation of H
};

// Gathers the flat entropies of this rank's micro-batch (f32 or f64, on the gate's device) into
// those of the whole run's micro-batch (the same dtype and device, any order). Collective: every
// rank calls it once per block per training forward, blocks in order.
using EntropyGather = std::function<Tensor(const Tensor& local)>;

struct EntropyStats {
  double median = 0;  // lower middle value for an even count
  double std = 0;     // unbiased; NaN for fewer than two values
};
// (Reads the result back to the host: for tests and tools; the gate itself keeps it on the device.)
EntropyStats entropy_stats(const Tensor& values);

struct GateDecision {
  Tensor gate;   // u8, H's shape and device: 1 where attention fires
  Tensor state;  // f64 [3] {m, s, tau} the gate used, on H's device (never changed afterwards)
  // The threshold, read on the host (a device-to-host copy when the gate ran on the GPU).
  double tau() const { return state.to(Device::CPU).item(ref::kGateTau); }
};

class AmorGate {
 public:
  // Checks the gate's keys of cfg (model.amor.offset_mode, kappa, momentum, m_init, s_init,
  // fixed_offset) and starts the EMA at (m_init, s_init).
  explicit AmorGate(const AmorConfig& cfg);

  // H: the normalised entropies of this rank's micro-batch (any shape, any device).
  GateDecision decide(const Tensor& H, bool training);

  // The threshold the current state gives (what an eval forward uses), and the EMA state: host
  // reads, a copy back from the device only when a training step changed the state since the
  // last read.
  double tau() const;
  AmorGateState state() const;
  // Replaces the EMA state (a checkpoint's); the next decide uploads it to H's device.
  void set_state(const AmorGateState& s);
  void set_gather(EntropyGather gather) { gather_ = std::move(gather); }
  // The current state {m, s, tau} as an f64 [3] tensor on the device the gate last ran on.
  const Tensor& device_state() const { return state_; }

 private:
  AmorGateRule rule_;
  Tensor state_;  // f64 [3] {m, s, tau}: the current state, on the device of the last decide
  // Host copy of state_ (m, s, tau), valid while host_valid_: set by set_state and by a read.
  mutable double host_[ref::kAmorGateStateSize] = {0, 0, 0};
  mutable bool host_valid_ = false;
  EntropyGather gather_;

  void read_host() const;
};

}  // namespace amor::model
