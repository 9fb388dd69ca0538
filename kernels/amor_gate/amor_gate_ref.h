// AMOR's entropy gate statistics and threshold (models/amor/amor_gate.h has the model's view):
//
//   median(H)  = the ((n-1)/2)-th smallest of the n values (0-based): the lower middle value for an
//                even count, as torch.median; always one of the inputs
//   std(H)     = sqrt(sum (H - mean)^2 / (n - 1)), mean = sum H / n, both sums in double in index
//                order; NaN for n < 2 (torch's unbiased std)
//   state      = {m, s, tau}, the gate's EMA in double:
//                  m   <- mu*m + (1-mu)*median
//                  s   <- mu*s + (1-mu)*std      (adaptive mode only, and only where std is a number)
//                  tau  = m + kappa*s (adaptive)  |  m + fixed_offset (fixed)
//   gate_i     = 1[double(H_i) > tau]
//
// Every EMA and threshold expression is evaluated as written, one rounding per operation (the
// CUDA kernels use __dmul_rn/__dadd_rn so that nvcc does not fuse them into FMAs), so a device
// state equals the cpu's bit for bit when its median and std do. T is float or double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace amor::ref {

struct AmorGateRule {
  bool adaptive = true;
  double kappa = 0, momentum = 0, fixed_offset = 0;
};

// Slots of the gate's state vector (f64 [kAmorGateStateSize]).
inline constexpr int kGateM = 0, kGateS = 1, kGateTau = 2, kAmorGateStateSize = 3;

template <class T>
double lower_median(const T* x, int64_t n) {
  std::vector<double> v(x, x + n);
  const auto k = static_cast<std::ptrdiff_t>((n - 1) / 2);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[static_cast<size_t>(k)];
}

template <class T>
double unbiased_std(const T* x, int64_t n) {
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(x[i]);
  mean /= static_cast<double>(n);
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    ss += d * d;
  }
  return std::sqrt(ss / static_cast<double>(n - 1));
}

inline double amor_gate_tau(double m, double s, const AmorGateRule& r) {
  return r.adaptive ? m + r.kappa * s : m + r.fixed_offset;
}

// state[3] {m, s, tau} <- one EMA step with this micro-batch's median and std.
inline void amor_gate_update(double* state, double median, double std, const AmorGateRule& r) {
  const double mu = r.momentum;
  state[kGateM] = mu * state[kGateM] + (1 - mu) * median;
  if (r.adaptive && !std::isnan(std)) state[kGateS] = mu * state[kGateS] + (1 - mu) * std;
  state[kGateTau] = amor_gate_tau(state[kGateM], state[kGateS], r);
}

template <class T>
void amor_gate_mask(const T* H, int64_t n, double tau, uint8_t* gate) {
  for (int64_t i = 0; i < n; ++i) gate[i] = static_cast<double>(H[i]) > tau ? 1 : 0;
}

}  // namespace amor::ref
