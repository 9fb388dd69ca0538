// f32 <-> bf16 conversion on the GPU, 8 elements per thread step (16-byte accesses):
//
//   bf16 -> f32: exact (the bf16 bits are the top half of the f32)
//   f32 -> bf16: round to nearest, ties to even (__float2bfloat16_rn); NaN stays NaN
//
// Same-dtype "conversions" are plain copies through the same map.
#include "kernels/cast/cast_cuda.h"
#include "kernels/cast/cuda_device.cuh"

namespace amor::cuda {
namespace {

template <class In, class Out>
struct CastOp {
  const In* __restrict__ src;
  Out* __restrict__ dst;
  template <int V>
  __device__ void apply(int64_t i) const {
    float v[V];
    load_vec<In, V>(src + i, v);
    store_vec<Out, V>(dst + i, v);
  }
};

}  // namespace

void cast(DType from, const void* src, DType to, void* dst, int64_t n, cudaStream_t stream) {
  const bool vec = aligned16(src) && aligned16(dst);
  dispatch_storage(from, "cuda::cast", [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch_storage(to, "cuda::cast", [&](auto out_tag) {
      using Out = decltype(out_tag);
      // 8 elements: 16 bytes of bf16, two 16-byte accesses of f32.
      launch_map<8>(n, vec, CastOp<In, Out>{static_cast<const In*>(src), static_cast<Out*>(dst)},
                    stream);
    });
  });
}

}  // namespace amor::cuda
