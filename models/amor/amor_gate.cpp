#include "models/amor/amor_gate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/core/error.h"

namespace amor::model {

namespace {

std::vector<double> host_values(const Tensor& t) {
  Tensor c = t.to(Device::CPU);
  std::vector<double> v(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) v[static_cast<size_t>(i)] = c.item(i);
  return v;
}

}  // namespace

EntropyStats entropy_stats(const Tensor& values) {
  std::vector<double> v = host_values(values);
  AMOR_CHECK(!v.empty(), "amor gate: no entropies to take statistics of");
  const size_t n = v.size();
  EntropyStats st;
  std::vector<double> sorted = v;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>((n - 1) / 2), sorted.end());
  st.median = sorted[(n - 1) / 2];
  if (n < 2) {
    st.std = std::numeric_limits<double>::quiet_NaN();
    return st;
  }
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  st.std = std::sqrt(ss / static_cast<double>(n - 1));
  return st;
}

AmorGate::AmorGate(const AmorConfig& cfg)
    : adaptive_(cfg.offset_mode == "adaptive"),
      kappa_(cfg.kappa),
      momentum_(cfg.momentum),
      fixed_offset_(cfg.fixed_offset),
      state_{cfg.m_init, cfg.s_init} {
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
}

double AmorGate::tau() const {
  return adaptive_ ? state_.m + kappa_ * state_.s : state_.m + fixed_offset_;
}

GateDecision AmorGate::decide(const Tensor& H, bool training) {
  Tensor local = H.to(Device::CPU).view({H.numel()});
  if (training) {
    Tensor all = gather_ ? gather_(local) : local;
    EntropyStats st = entropy_stats(all);
    state_.m = momentum_ * state_.m + (1 - momentum_) * st.median;
    if (adaptive_ && !std::isnan(st.std)) state_.s = momentum_ * state_.s + (1 - momentum_) * st.std;
  }
  GateDecision d;
  d.tau = tau();
  d.gate = Tensor::empty(H.shape(), DType::U8);
  uint8_t* g = d.gate.data<uint8_t>();
  for (int64_t i = 0; i < local.numel(); ++i) g[i] = local.item(i) > d.tau ? 1 : 0;
  d.gate = d.gate.to(H.device());
  return d;
}

}  // namespace amor::model
