// SwiGLU on the GPU, elementwise over n elements, in f32 (math as swiglu_ref.h):
//
//   s = sigmoid(g) = 1 / (1 + exp(-g)),  silu(g) = g * s
//   h  = silu(g) * u
//   dg = dh * u * s * (1 + g * (1 - s)),  du = dh * silu(g)
//
// Each thread step handles 16 bytes of each tensor (launch_map); the backward reads g, u, dh once
// and writes dg, du once, so both directions move the minimum bytes.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/swiglu/swiglu_cuda.h"

namespace amor::cuda {
namespace {

template <class T>
struct SwigluFwd {
  const T* __restrict__ g;
  const T* __restrict__ u;
  T* __restrict__ h;
  template <int V>
  __device__ void apply(int64_t i) const {
    float vg[V], vu[V];
    load_vec<T, V>(g + i, vg);
    load_vec<T, V>(u + i, vu);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float s = 1.0f / (1.0f + expf(-vg[k]));
      vg[k] = vg[k] * s * vu[k];
    }
    store_vec<T, V>(h + i, vg);
  }
};

template <class T>
struct SwigluBwd {
  const T* __restrict__ g;
  const T* __restrict__ u;
  const T* __restrict__ dh;
  T* __restrict__ dg;
  T* __restrict__ du;
  template <int V>
  __device__ void apply(int64_t i) const {
    float vg[V], vu[V], vd[V], og[V], ou[V];
    load_vec<T, V>(g + i, vg);
    load_vec<T, V>(u + i, vu);
    load_vec<T, V>(dh + i, vd);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float s = 1.0f / (1.0f + expf(-vg[k]));
      og[k] = vd[k] * vu[k] * s * (1.0f + vg[k] * (1.0f - s));
      ou[k] = vd[k] * (vg[k] * s);
    }
    store_vec<T, V>(dg + i, og);
    store_vec<T, V>(du + i, ou);
  }
};

}  // namespace

void swiglu_forward(DType t, const void* g, const void* u, void* h, int64_t n, cudaStream_t s) {
  dispatch_storage(t, "cuda::swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    launch_map<kVec16<T>>(n, aligned16(g) && aligned16(u) && aligned16(h),
                          SwigluFwd<T>{static_cast<const T*>(g), static_cast<const T*>(u),
                                       static_cast<T*>(h)},
                          s);
  });
}

void swiglu_backward(DType t, const void* g, const void* u, const void* dh, void* dg, void* du,
                     int64_t n, cudaStream_t s) {
  dispatch_storage(t, "cuda::swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    launch_map<kVec16<T>>(
        n, aligned16(g) && aligned16(u) && aligned16(dh) && aligned16(dg) && aligned16(du),
        SwigluBwd<T>{static_cast<const T*>(g), static_cast<const T*>(u), static_cast<const T*>(dh),
                     static_cast<T*>(dg), static_cast<T*>(du)},
        s);
  });
}

}  // namespace amor::cuda
