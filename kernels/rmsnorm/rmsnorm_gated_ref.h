// Gated RMSNorm with per-group statistics, as in Mamba2 and Gated DeltaNet. Per row of x, z
// viewed as [rows, D], the D channels form D/G contiguous groups of G; statistics are per group.
// silu(z) = z * sigmoid(z).
//
//   norm_before_gate = false (Mamba2:  y = rmsnorm_group(x * silu(z)) * w):   u = x * silu(z)
//   norm_before_gate = true  (GDN:     y = rmsnorm_group(x) * w * silu(z)):   u = x
//
//   r      = 1 / sqrt(mean_{k in group} u_k^2 + eps)       (saved as rstd[row, group])
//   uh_j   = u_j * r
//   y_j    = uh_j * w_j * a_j,   a_j = silu(z_j) if norm_before_gate else 1
//
// Backward, with g_j = dy_j * w_j * a_j (the gradient reaching uh_j):
//   dw_j  = sum over rows of dy_j * uh_j * a_j
//   du_j  = r * (g_j - uh_j * mean_{k in group}(g_k * uh_k))       (as plain RMSNorm)
//   norm_before_gate: dx_j = du_j,            dz_j = dy_j * w_j * uh_j * silu'(z_j)
//   otherwise:        dx_j = du_j * silu(z_j), dz_j = du_j * x_j * silu'(z_j)
//   silu'(z) = s * (1 + z * (1 - s)),  s = sigmoid(z)
//
// Sums accumulate in double; r is rounded to T once, used by the forward and saved.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace amor::ref {
namespace rmsnorm_gated_detail {

inline double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

}  // namespace rmsnorm_gated_detail

template <class T>
void rmsnorm_gated_forward(const T* x, const T* z, const T* w, T* y, T* rstd, int64_t rows,
                           int64_t d, int64_t group, double eps, bool norm_before_gate) {
  using rmsnorm_gated_detail::sigmoid;
  const int64_t groups = d / group;
  std::vector<double> u(group);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t base = r * d + gi * group;  // first element of this group
      double ss = 0;
      for (int64_t k = 0; k < group; ++k) {
        const double zk = z[base + k];
        u[k] = norm_before_gate ? double(x[base + k]) : double(x[base + k]) * zk * sigmoid(zk);
        ss += u[k] * u[k];
      }
      const T rs = static_cast<T>(1.0 / std::sqrt(ss / double(group) + eps));
      rstd[r * groups + gi] = rs;
      for (int64_t k = 0; k < group; ++k) {
        const double zk = z[base + k];
        const double a = norm_before_gate ? zk * sigmoid(zk) : 1.0;
        y[base + k] = static_cast<T>(u[k] * rs * w[gi * group + k] * a);
      }
    }
  }
}

template <class T>
void rmsnorm_gated_backward(const T* x, const T* z, const T* w, const T* rstd, const T* dy, T* dx,
                            T* dz, T* dw, int64_t rows, int64_t d, int64_t group,
                            bool norm_before_gate) {
  using rmsnorm_gated_detail::sigmoid;
  const int64_t groups = d / group;
  std::vector<double> dw_acc(d, 0.0), uh(group), g(group);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t base = r * d + gi * group, wbase = gi * group;
      const double rs = rstd[r * groups + gi];
      double dot = 0;  // sum_k g_k * uh_k over the group
      for (int64_t k = 0; k < group; ++k) {
        const double zk = z[base + k], silu = zk * sigmoid(zk);
        const double u = norm_before_gate ? double(x[base + k]) : double(x[base + k]) * silu;
        const double a = norm_before_gate ? silu : 1.0;
        uh[k] = u * rs;
        g[k] = double(dy[base + k]) * w[wbase + k] * a;
        dot += g[k] * uh[k];
        dw_acc[wbase + k] += double(dy[base + k]) * uh[k] * a;
      }
      const double mean = dot / double(group);
      for (int64_t k = 0; k < group; ++k) {
        const double zk = z[base + k], s = sigmoid(zk), silu = zk * s;
        const double dsilu = s * (1.0 + zk * (1.0 - s));
        const double du = rs * (g[k] - uh[k] * mean);
        if (norm_before_gate) {
          dx[base + k] = static_cast<T>(du);
          dz[base + k] = static_cast<T>(double(dy[base + k]) * w[wbase + k] * uh[k] * dsilu);
        } else {
          dx[base + k] = static_cast<T>(du * silu);
          dz[base + k] = static_cast<T>(du * x[base + k] * dsilu);
        }
      }
    }
  }
  for (int64_t j = 0; j < d; ++j) dw[j] = static_cast<T>(dw_acc[j]);
}

}  // namespace amor::ref
