#include "models/amor/amor_gate.h"

#include <cmath>
#include <string>

#include "kernels/core/error.h"

namespace amor::model {

EntropyStats entropy_stats(const Tensor& values) {
  AMOR_CHECK(values.defined() && values.numel() > 0, "amor gate: no entropies to take statistics of");
  Tensor st = amor_entropy_stats(values).to(Device::CPU);
  return {st.item(0), st.item(1)};
}

AmorGate::AmorGate(const AmorConfig& cfg)
    : rule_{cfg.offset_mode == "adaptive", cfg.kappa, cfg.momentum, cfg.fixed_offset} {
  AMOR_CHECK(cfg.offset_mode == "adaptive" || cfg.offset_mode == "fixed",
             "model.amor.offset_mode: '{}' is not one of adaptive (tau = m + kappa*s), fixed "
             "(tau = m + fixed_offset)",
             cfg.offset_mode);
  // A negative kappa would put the threshold below the median; the gate is meant to fire on the
  // uncertain tail. A threshold below the median is offset_mode fixed with a negative offset.
  AMOR_CHECK(std::isfinite(cfg.kappa) && cfg.kappa >= 0,
             "model.amor.kappa: {} must be a finite number >= 0", cfg.kappa);
  // momentum 1 freezes the threshold at its initial value (an ablation); 0 uses each batch's own.
  AMOR_CHECK(cfg.momentum >= 0 && cfg.momentum <= 1,
             "model.amor.momentum: {} must lie in [0, 1]", cfg.momentum);
  AMOR_CHECK(std::isfinite(cfg.m_init), "model.amor.m_init: {} must be finite", cfg.m_init);
  AMOR_CHECK(std::isfinite(cfg.s_init) && cfg.s_init >= 0,
             "model.amor.s_init: {} must be a finite number >= 0", cfg.s_init);
  AMOR_CHECK(std::isfinite(cfg.fixed_offset), "model.amor.fixed_offset: {} must be finite",
             cfg.fixed_offset);
  set_state({cfg.m_init, cfg.s_init});
}

void AmorGate::set_state(const AmorGateState& s) {
  state_ = amor_gate_state(s.m, s.s, rule_);
  for (int i = 0; i < ref::kAmorGateStateSize; ++i) host_[i] = state_.item(i);
  host_valid_ = true;
}

void AmorGate::read_host() const {
  if (host_valid_) return;
  Tensor h = state_.to(Device::CPU);
  for (int i = 0; i < ref::kAmorGateStateSize; ++i) host_[i] = h.item(i);
  host_valid_ = true;
}

AmorGateState AmorGate::state() const {
  read_host();
  return {host_[ref::kGateM], host_[ref::kGateS]};
}

double AmorGate::tau() const {
  read_host();
  return host_[ref::kGateTau];
}

GateDecision AmorGate::decide(const Tensor& H, bool training) {
  // The state follows the entropies' device: uploaded once after construction or set_state (a
  // checkpoint), then stepped where it lives.
  if (state_.device() != H.device()) state_ = state_.to(H.device());
  Tensor local = H.view({H.numel()});
  if (training) {
    Tensor all = gather_ ? gather_(local) : local;
    AMOR_CHECK(all.defined() && all.device() == H.device(),
               "amor gate: the entropy gather returned {} for entropies {}; it must return a tensor on "
               "their device",
               all.defined() ? all.str() : std::string("an undefined tensor"), H.str());
    state_ = amor_gate_update(state_, amor_entropy_stats(all), rule_);
    host_valid_ = false;
  }
  return {amor_gate_mask(H, state_), state_};
}

}  // namespace amor::model
