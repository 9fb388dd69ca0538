// L2 normalisation over the last dimension D, per row of x viewed as [rows, D], as
// flash-linear-attention's l2norm (Gated DeltaNet normalises q and k per head with it):
//
//   r    = 1 / sqrt(sum_j x_j^2 + eps)          (saved as rstd[row])
//   y_j  = x_j * r
//   dx_j = r * (dy_j - y_j * sum_k dy_k * y_k)
//
// (dx: dy_j/dx_k = r delta_jk - r^3 x_j x_k.) Sums accumulate in double; r is rounded to T once,
// used by the forward and saved for the backward.
#pragma once
#include <cmath>
#include <cstdint>

namespace amor::ref {

template <class T>
void l2norm_forward(const T* x, T* y, T* rstd, int64_t rows, int64_t d, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double(xr[j]) * xr[j];
    const T rs = static_cast<T>(1.0 / std::sqrt(ss + eps));
    rstd[r] = rs;
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = static_cast<T>(double(xr[j]) * rs);
  }
}

template <class T>
void l2norm_backward(const T* x, const T* rstd, const T* dy, T* dx, int64_t rows, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    const double rs = rstd[r];
    double dot = 0;  // sum_k dy_k * y_k
    for (int64_t k = 0; k < d; ++k) dot += double(dyr[k]) * xr[k] * rs;
    for (int64_t j = 0; j < d; ++j)
      dx[r * d + j] = static_cast<T>(rs * (double(dyr[j]) - double(xr[j]) * rs * dot));
  }
}

}  // namespace amor::ref
