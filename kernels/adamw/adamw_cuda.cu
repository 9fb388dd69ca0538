// The AdamW step on the GPU, elementwise, in f32 with torch.optim.AdamW's order (adamw_ref.h):
//
//   p <- p * (1 - lr wd)
//   m <- m * beta1 + g * (1 - beta1)
//   v <- v * beta2 + (1 - beta2) * g * g
//   p <- p - (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//
// The scalar factors are formed in double on the host and rounded to f32 once, exactly as the cpu
// reference does; each element operation is a correctly rounded f32 intrinsic (__fmul_rn, ...),
// which the compiler may not fuse into an FMA, so the result equals the cpu reference's bits.
// Reads p, g, m, v and writes p, m, v once: 16 (f32 grad) or 14 (bf16 grad) bytes per element
// in, 12 out.
#include <cmath>

#include "kernels/adamw/adamw_cuda.h"
#include "kernels/cast/cuda_device.cuh"

namespace amor::cuda {
namespace {

struct Scalars {
  float decay, b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps;
};

template <class G>
struct AdamwOp {
  float* __restrict__ p;
  const G* __restrict__ g;
  float* __restrict__ m;
  float* __restrict__ v;
  Scalars k;
  template <int V>
  __device__ void apply(int64_t i) const {
    float vp[V], vg[V], vm[V], vv[V];
    load_vec<float, V>(p + i, vp);
    load_vec<G, V>(g + i, vg);
    load_vec<float, V>(m + i, vm);
    load_vec<float, V>(v + i, vv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      vp[e] = __fmul_rn(vp[e], k.decay);
      vm[e] = __fadd_rn(__fmul_rn(vm[e], k.b1), __fmul_rn(vg[e], k.one_minus_b1));
      vv[e] = __fadd_rn(__fmul_rn(vv[e], k.b2), __fmul_rn(__fmul_rn(k.one_minus_b2, vg[e]), vg[e]));
      const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv[e]), k.bc2_sqrt), k.eps);
      vp[e] = __fsub_rn(vp[e], __fdiv_rn(__fmul_rn(k.step_size, vm[e]), denom));
    }
    store_vec<float, V>(p + i, vp);
    store_vec<float, V>(m + i, vm);
    store_vec<float, V>(v + i, vv);
  }
};

}  // namespace

void adamw_step(float* param, DType grad_dtype, const void* grad, float* m, float* v, int64_t n,
                int64_t step, double lr, double beta1, double beta2, double eps,
                double weight_decay, cudaStream_t s) {
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const Scalars k{static_cast<float>(1.0 - lr * weight_decay),
                  static_cast<float>(beta1),
                  static_cast<float>(1.0 - beta1),
                  static_cast<float>(beta2),
                  static_cast<float>(1.0 - beta2),
                  static_cast<float>(lr / bias_correction1),
                  static_cast<float>(std::sqrt(bias_correction2)),
                  static_cast<float>(eps)};
  const bool vec = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v);
  dispatch_storage(grad_dtype, "cuda::adamw_step", [&](auto tag) {
    using G = decltype(tag);
    launch_map<4>(n, vec, AdamwOp<G>{param, static_cast<const G*>(grad), m, v, k}, s);
  });
}

}  // namespace amor::cuda
