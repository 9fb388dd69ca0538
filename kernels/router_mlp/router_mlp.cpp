#include "kernels/router_mlp/router_mlp.h"

#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/router_mlp/router_mlp_cuda.h"
static_assert(amor::cuda::kRouterMlpCudaMaxRows == amor::kRouterMlpMaxRows);
#endif

namespace amor {
namespace {

// The cpu reference: every dot product and sum in double, in index order.
template <class T, class P>
void reference(const T* x, const P* w1, const P* b1, const P* w2, const P* u, const P* b2, P* y,
               int64_t n, int64_t d, int64_t W) {
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * d;
    double hidden = 0;
    for (int64_t j = 0; j < W; ++j) {
      double a = static_cast<double>(b1[j]);
      for (int64_t c = 0; c < d; ++c) a += static_cast<double>(w1[j * d + c]) * static_cast<double>(xr[c]);
      hidden += static_cast<double>(w2[j]) * (a / (1.0 + std::exp(-a)));
    }
    double skip = 0;
    for (int64_t c = 0; c < d; ++c) skip += static_cast<double>(u[c]) * static_cast<double>(xr[c]);
    y[r] = static_cast<P>(static_cast<double>(b2[0]) + skip + hidden);
  }
}

}  // namespace

Tensor router_mlp_forward(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                          const Tensor& u, const Tensor& b2) {
  const char* op = "router_mlp_forward";
  check_dim(op, "x", x, 2);
  check_dim(op, "w1", w1, 2);
  const int64_t n = x.size(0), d = x.size(1), W = w1.size(0);
  AMOR_CHECK(w1.size(1) == d, "{}: w1 is {} but x has {} columns", op, w1.str(), d);
  check_defined(op, "b1", b1);
  check_defined(op, "w2", w2);
  check_defined(op, "u", u);
  check_defined(op, "b2", b2);
  AMOR_CHECK(b1.numel() == W && w2.numel() == W, "{}: b1 {} and w2 {} must hold W = {} values", op,
             b1.str(), w2.str(), W);
  AMOR_CHECK(u.numel() == d, "{}: u {} must hold d = {} values", op, u.str(), d);
  AMOR_CHECK(b2.numel() == 1, "{}: b2 {} must hold one value", op, b2.str());
  const DType pt = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  for (const auto& [name, t] : {std::pair{"w1", &w1}, {"b1", &b1}, {"w2", &w2}, {"u", &u}, {"b2", &b2}}) {
    AMOR_CHECK(t->dtype() == pt, "{}: {} is {}, expected {} for an x of {}", op, name, t->str(),
               dtype_name(pt), dtype_name(x.dtype()));
    AMOR_CHECK(t->device() == x.device(), "{}: {} {} and x {} are on different devices", op, name,
               t->str(), x.str());
  }
  Tensor y = Tensor::empty({n}, pt, x.device());
  if (!x.is_cpu()) {
    check_cuda_storage(op, "x", x);
    AMOR_CHECK(n <= kRouterMlpMaxRows,
               "{}: {} rows; cuda takes at most {} (a decode step's batch: more rows belong to GEMMs)",
               op, n, kRouterMlpMaxRows);
    check_cuda_int_range(op, "d", d);
    check_cuda_int_range(op, "W", W);
    AMOR_ON_CUDA(op, x, {
      Tensor partial = Tensor::empty({cuda::router_mlp_partial_blocks(W), n}, DType::F32, x.device());
      cuda::router_mlp_forward(x.dtype(), x.raw_data(), w1.data<float>(), b1.data<float>(),
                               w2.data<float>(), u.data<float>(), b2.data<float>(),
                               partial.data<float>(), y.data<float>(), n, d, W);
      return y;
    });
  }
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      reference(x.data<T>(), w1.data<double>(), b1.data<double>(), w2.data<double>(),
                u.data<double>(), b2.data<double>(), y.data<double>(), n, d, W);
    } else {
      reference(x.data<T>(), w1.data<float>(), b1.data<float>(), w2.data<float>(),
                u.data<float>(), b2.data<float>(), y.data<float>(), n, d, W);
    }
  });
  return y;
}

}  // namespace amor
