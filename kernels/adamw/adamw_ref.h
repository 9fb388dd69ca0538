// AdamW, one step, exactly as torch.optim.AdamW (amsgrad off, maximize off):
//
//   p  <- p (1 - lr wd)                                   decoupled weight decay, first
//   m  <- beta1 m + (1 - beta1) g
//   v  <- beta2 v + (1 - beta2) g^2
//   p  <- p - (lr / (1 - beta1^step)) m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//
// step is 1-based (the step being taken). The scalar factors are formed in double, as Python
// floats are in torch, and each element is updated in T (float or double) in torch's order.
#pragma once
#include <cmath>
#include <cstdint>

namespace amor::ref {

template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, int64_t step, double lr, double beta1,
                double beta2, double eps, double weight_decay) {
  const T decay = static_cast<T>(1.0 - lr * weight_decay);
  const T b1 = static_cast<T>(beta1), one_minus_b1 = static_cast<T>(1.0 - beta1);
  const T b2 = static_cast<T>(beta2), one_minus_b2 = static_cast<T>(1.0 - beta2);
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const T step_size = static_cast<T>(lr / bias_correction1);
  const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  const T eps_t = static_cast<T>(eps);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = p[i] * decay;
    m[i] = m[i] * b1 + g[i] * one_minus_b1;
    v[i] = v[i] * b2 + one_minus_b2 * g[i] * g[i];
    const T denom = std::sqrt(v[i]) / bc2_sqrt + eps_t;
    p[i] = p[i] - step_size * m[i] / denom;
  }
}

}  // namespace amor::ref
