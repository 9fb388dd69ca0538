// RMSNorm over the last dimension D, per row of x viewed as [rows, D]:
//
//   r      = 1 / sqrt(mean_j x_j^2 + eps)                  (saved as rstd[row])
//   y_j    = w_j * x_j * r
//   dw_j   = sum over rows of dy_j * x_j * r
//   dx_j   = r * (g_j - xh_j * mean_k(g_k * xh_k)),   g = dy * w,  xh = x * r
//
// (dx: y depends on x_j directly and through r, with dr/dx_k = -r^3 x_k / D.) Sums accumulate in
// double, so the float version is a trustworthy reference; r is rounded to T once and that same
// value is used by the forward and saved for the backward.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace amor::ref {

template <class T>
void rmsnorm_forward(const T* x, const T* w, T* y, T* rstd, int64_t rows, int64_t d, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double(xr[j]) * xr[j];
    const T rs = static_cast<T>(1.0 / std::sqrt(ss / double(d) + eps));
    rstd[r] = rs;
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = static_cast<T>(double(w[j]) * xr[j] * rs);
  }
}

template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw,
                      int64_t rows, int64_t d) {
  std::vector<double> dw_acc(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    const double rs = rstd[r];
    double dot = 0;  // sum_k g_k * xh_k
    for (int64_t k = 0; k < d; ++k) dot += double(dyr[k]) * w[k] * xr[k] * rs;
    const double mean = dot / double(d);
    for (int64_t j = 0; j < d; ++j) {
      const double xh = double(xr[j]) * rs;
      dx[r * d + j] = static_cast<T>(rs * (double(dyr[j]) * w[j] - xh * mean));
      dw_acc[j] += double(dyr[j]) * xh;
    }
  }
  for (int64_t j = 0; j < d; ++j) dw[j] = static_cast<T>(dw_acc[j]);
}

}  // namespace amor::ref
