// Causal depthwise conv1d (+ SiLU) on the GPU (math as conv1d_ref.h), in f32. Per (b, c), with
// the padded input xp[q] = s0[b,c,q] for q < K-1 (zero without s0) and xp[K-1+t] = x[b,t,c]:
//
//   a[t]  = bias[c] + sum_{j<K} w[c,j] * xp[t+j]        y[t] = silu(a) or a
//   s1[i] = xp[T+i]                                      (final state, i < K-1)
// Backward, da[t] = dy[t] * silu'(a[t]) (or dy[t]), da = 0 outside [0, T):
//   dxp[p]  = sum_{j<K} w[c,j] * da[p-j]  +  ds1[p-T] (p >= T)
//   dx[t]   = dxp[K-1+t],  ds0[p] = dxp[p] (p < K-1)
//   dw[c,j] = sum_{b,t} da[t] * xp[t+j],  dbias[c] = sum_{b,t} da[t]
//
// Layout: a thread owns VC adjacent channels (VC = 4: 16-byte f32 / 8-byte bf16 accesses,
// coalesced across the warp) of one sequence b and a chunk of kChunk time steps, and slides a
// K-wide window of inputs (and, backward, of da) along time in registers (K is a template
// parameter, up to kConv1dMaxK), so each input is read from memory once plus K-1 steps of overlap
// per chunk. The loads of kUnroll consecutive steps are issued before any of them is used, so each
// thread keeps several loads in flight. The backward's chunk [t0, t1) computes da on
// [t0, t1 + K - 1) and emits dxp[t'] at step t' once da[t'-K+1 .. t'] are in the window; it sums
// dw and dbias over its own steps and writes one partial per (b, chunk), which column_sum adds
// in a fixed order (no atomics). The final state is a separate small kernel.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/conv1d/conv1d_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kChunk = 64;
constexpr int kUnroll = 4;  // time steps whose loads are issued together

__device__ __forceinline__ float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }

// Where one thread works: channels [c0, c0 + VC) of sequence b, steps [t0, t1).
struct Tile {
  int64_t b, c0, t0, t1;
};

template <int VC>
__device__ __forceinline__ bool tile_of(int64_t T, int64_t C, Tile& tile) {
  tile.c0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * VC;
  tile.b = blockIdx.z;
  tile.t0 = int64_t(blockIdx.y) * kChunk;
  tile.t1 = tile.t0 + kChunk < T ? tile.t0 + kChunk : T;
  return tile.c0 < C;
}

// xp[q] for the tile's channels: the initial state (or zero) before x, x after.
template <class T, int VC>
__device__ __forceinline__ void load_xp(const T* x, const T* s0, const Tile& tile, int64_t q,
                                        int64_t Tn, int64_t C, int K, float (&out)[VC]) {
  if (q >= K - 1) {
    load_vec<T, VC>(x + (tile.b * Tn + (q - (K - 1))) * C + tile.c0, out);
  } else {
#pragma unroll
    for (int e = 0; e < VC; ++e)
      out[e] = s0 ? to_f32(s0[(tile.b * C + tile.c0 + e) * (K - 1) + q]) : 0.0f;
  }
}

template <class T, int VC, int K>
__device__ __forceinline__ void load_weights(const T* w, const T* bias, int64_t c0,
                                             float (&wv)[K][VC], float (&bv)[VC]) {
#pragma unroll
  for (int e = 0; e < VC; ++e) {
#pragma unroll
    for (int j = 0; j < K; ++j) wv[j][e] = to_f32(w[(c0 + e) * K + j]);
    bv[e] = bias ? to_f32(bias[c0 + e]) : 0.0f;
  }
}

template <class T, int VC, int K>
__global__ void __launch_bounds__(kThreads)
    conv_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                    const T* __restrict__ s0, bool silu, T* __restrict__ y, int64_t Tn,
                    int64_t C) {
  Tile tile;
  if (!tile_of<VC>(Tn, C, tile)) return;
  float wv[K][VC], bv[VC], win[K][VC];
  load_weights<T, VC, K>(w, bias, tile.c0, wv, bv);
#pragma unroll
  for (int j = 0; j + 1 < K; ++j) load_xp<T, VC>(x, s0, tile, tile.t0 + j, Tn, C, K, win[j]);
  // kUnroll steps at a time: their loads are issued together, then the window slides over them.
  for (int64_t t = tile.t0; t < tile.t1; t += kUnroll) {
    const int64_t n = tile.t1 - t;
    float xs[kUnroll][VC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (u < n) load_vec<T, VC>(x + (tile.b * Tn + t + u) * C + tile.c0, xs[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (u >= n) break;
#pragma unroll
      for (int e = 0; e < VC; ++e) win[K - 1][e] = xs[u][e];  // xp[t + K - 1] = x[t]
      float out[VC];
#pragma unroll
      for (int e = 0; e < VC; ++e) {
        float a = bv[e];
#pragma unroll
        for (int j = 0; j < K; ++j) a += wv[j][e] * win[j][e];
        out[e] = silu ? a * sigmoidf(a) : a;
      }
      store_vec<T, VC>(y + (tile.b * Tn + t + u) * C + tile.c0, out);
#pragma unroll
      for (int j = 0; j + 1 < K; ++j)
#pragma unroll
        for (int e = 0; e < VC; ++e) win[j][e] = win[j + 1][e];
    }
  }
}

// s1[b,c,i] = xp[T+i]: one thread per (b, c, i).
template <class T>
__global__ void final_state_kernel(const T* __restrict__ x, const T* __restrict__ s0,
                                   T* __restrict__ s1, int64_t B, int64_t Tn, int64_t C, int K) {
  const int64_t total = B * C * (K - 1);
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k % (K - 1), c = (k / (K - 1)) % C, b = k / ((K - 1) * C);
    const int64_t q = Tn + i;
    T v;
    if (q >= K - 1) {
      v = x[(b * Tn + (q - (K - 1))) * C + c];
    } else {
      v = s0 ? s0[(b * C + c) * (K - 1) + q] : from_f32<T>(0.0f);
    }
    s1[k] = v;
  }
}

template <class T, int VC, int K>
__global__ void __launch_bounds__(kThreads)
    conv_bwd_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                    const T* __restrict__ s0, bool silu, const T* __restrict__ dy,
                    const T* __restrict__ ds1, T* __restrict__ dx, T* __restrict__ ds0,
                    float* __restrict__ partial, int64_t Tn, int64_t C) {
  Tile tile;
  if (!tile_of<VC>(Tn, C, tile)) return;
  float wv[K][VC], bv[VC], xwin[K][VC], dwin[K][VC], dwacc[K][VC], dbacc[VC];
  load_weights<T, VC, K>(w, bias, tile.c0, wv, bv);
#pragma unroll
  for (int e = 0; e < VC; ++e) {
    dbacc[e] = 0.0f;
#pragma unroll
    for (int j = 0; j < K; ++j) dwacc[j][e] = dwin[j][e] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j + 1 < K; ++j) load_xp<T, VC>(x, s0, tile, tile.t0 + j, Tn, C, K, xwin[j]);

  const int64_t last = tile.t1 + K - 2;  // the last step t' (inclusive)
  for (int64_t t = tile.t0; t <= last; t += kUnroll) {
    // The inputs of up to kUnroll steps, loaded together (steps past the sequence load nothing).
    const int64_t n = (Tn < last + 1 ? Tn : last + 1) - t;
    float xs[kUnroll][VC], gs[kUnroll][VC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (u < n) {
        const int64_t i = (tile.b * Tn + t + u) * C + tile.c0;
        load_vec<T, VC>(x + i, xs[u]);
        load_vec<T, VC>(dy + i, gs[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t tp = t + u;
      if (tp > last) break;
      // da[t'] into the window (zero past the end of the sequence).
#pragma unroll
      for (int j = 0; j + 1 < K; ++j)
#pragma unroll
        for (int e = 0; e < VC; ++e) dwin[j][e] = dwin[j + 1][e];
      if (u < n) {
#pragma unroll
        for (int e = 0; e < VC; ++e) xwin[K - 1][e] = xs[u][e];  // xp[t' + K - 1] = x[t']
#pragma unroll
        for (int e = 0; e < VC; ++e) {
          float da = gs[u][e];
          if (silu) {
            float a = bv[e];
#pragma unroll
            for (int j = 0; j < K; ++j) a += wv[j][e] * xwin[j][e];
            const float sg = sigmoidf(a);
            da *= sg * (1.0f + a * (1.0f - sg));
          }
          dwin[K - 1][e] = da;
          if (tp < tile.t1) {  // this chunk's own steps feed dw and dbias
            dbacc[e] += da;
#pragma unroll
            for (int j = 0; j < K; ++j) dwacc[j][e] += da * xwin[j][e];
          }
        }
#pragma unroll
        for (int j = 0; j + 1 < K; ++j)
#pragma unroll
          for (int e = 0; e < VC; ++e) xwin[j][e] = xwin[j + 1][e];
      } else {
#pragma unroll
        for (int e = 0; e < VC; ++e) dwin[K - 1][e] = 0.0f;
      }
      // dxp[t'] = sum_j w[j] da[t'-j] (+ ds1[t'-T]): dx[t'-K+1] for the chunk's steps, ds0[t']
      // for t' < K-1 in the first chunk.
      const bool to_dx = tp >= tile.t0 + K - 1;
      const bool to_ds0 = tile.t0 == 0 && tp < K - 1 && ds0 != nullptr;
      if (!to_dx && !to_ds0) continue;
      float out[VC];
#pragma unroll
      for (int e = 0; e < VC; ++e) {
        float v = 0.0f;
#pragma unroll
        for (int j = 0; j < K; ++j) v += wv[j][e] * dwin[K - 1 - j][e];
        if (tp >= Tn && ds1) v += to_f32(ds1[(tile.b * C + tile.c0 + e) * (K - 1) + (tp - Tn)]);
        out[e] = v;
      }
      if (to_dx) {
        store_vec<T, VC>(dx + (tile.b * Tn + (tp - (K - 1))) * C + tile.c0, out);
      } else {
#pragma unroll
        for (int e = 0; e < VC; ++e)
          ds0[(tile.b * C + tile.c0 + e) * (K - 1) + tp] = from_f32<T>(out[e]);
      }
    }
  }
  // Partial sums of this (b, chunk): dw in dw's own [C, K] layout, then dbias [C].
  float* p = partial + (tile.b * gridDim.y + blockIdx.y) * (K + 1) * C;
#pragma unroll
  for (int e = 0; e < VC; ++e) {
#pragma unroll
    for (int j = 0; j < K; ++j) p[(tile.c0 + e) * K + j] = dwacc[j][e];
    p[K * C + tile.c0 + e] = dbacc[e];
  }
}

template <class T>
__global__ void conv_step_kernel(const T* __restrict__ x_t, T* __restrict__ state,
                                 const T* __restrict__ w, const T* __restrict__ bias, bool silu,
                                 T* __restrict__ y_t, int64_t B, int64_t C, int K) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < B * C;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = k % C;
    T* st = state + k * (K - 1);
    const float xt = to_f32(x_t[k]);
    float a = bias ? to_f32(bias[c]) : 0.0f;
    for (int j = 0; j < K - 1; ++j) a += to_f32(w[c * K + j]) * to_f32(st[j]);
    a += to_f32(w[c * K + K - 1]) * xt;
    y_t[k] = from_f32<T>(silu ? a * sigmoidf(a) : a);
    for (int j = 0; j + 1 < K - 1; ++j) st[j] = st[j + 1];
    if (K > 1) st[K - 2] = x_t[k];
  }
}

int64_t chunks_of(int64_t T) { return T > 0 ? ceil_div(T, kChunk) : 1; }

// Calls f(T{}, integral_constant VC, integral_constant K) for the dtype, channel width and K.
template <class F>
void dispatch(DType t, int64_t C, int64_t K, std::initializer_list<const void*> ptrs, F&& f) {
  dispatch_storage(t, "cuda conv1d", [&](auto tag) {
    using T = decltype(tag);
    bool vec = C % 4 == 0;
    for (const void* p : ptrs) vec = vec && (!p || aligned16(p));
    auto with_k = [&](auto vc) {
      switch (K) {
        case 1: f(T{}, vc, std::integral_constant<int, 1>{}); break;
        case 2: f(T{}, vc, std::integral_constant<int, 2>{}); break;
        case 3: f(T{}, vc, std::integral_constant<int, 3>{}); break;
        case 4: f(T{}, vc, std::integral_constant<int, 4>{}); break;
        case 5: f(T{}, vc, std::integral_constant<int, 5>{}); break;
        case 6: f(T{}, vc, std::integral_constant<int, 6>{}); break;
        case 7: f(T{}, vc, std::integral_constant<int, 7>{}); break;
        case 8: f(T{}, vc, std::integral_constant<int, 8>{}); break;
        default: ::amor::cuda_fail(__FILE__, __LINE__, "cuda conv1d", "kernel size K not in 1..8");
      }
    };
    if (vec) {
      with_k(std::integral_constant<int, 4>{});
    } else {
      with_k(std::integral_constant<int, 1>{});
    }
  });
}

dim3 tile_grid(int64_t B, int64_t T, int64_t C, int vc) {
  return dim3(unsigned(ceil_div(ceil_div(C, vc), kThreads)), unsigned(chunks_of(T)), unsigned(B));
}

}  // namespace

void conv1d_forward(DType t, const void* x, const void* w, const void* bias, const void* s0,
                    bool silu, void* y, void* s1, int64_t B, int64_t T, int64_t C, int64_t K,
                    cudaStream_t s) {
  if (B == 0 || C == 0) return;
  if (T > 0) {
    dispatch(t, C, K, {x, y}, [&](auto tag, auto vc_c, auto k_c) {
      using T_ = decltype(tag);
      constexpr int VC = decltype(vc_c)::value, KK = decltype(k_c)::value;
      conv_fwd_kernel<T_, VC, KK><<<tile_grid(B, T, C, VC), kThreads, 0, s>>>(
          static_cast<const T_*>(x), static_cast<const T_*>(w), static_cast<const T_*>(bias),
          static_cast<const T_*>(s0), silu, static_cast<T_*>(y), T, C);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
  if (K > 1) {
    dispatch_storage(t, "cuda conv1d", [&](auto tag) {
      using T_ = decltype(tag);
      final_state_kernel<T_><<<grid_for(B * C * (K - 1), 256), 256, 0, s>>>(
          static_cast<const T_*>(x), static_cast<const T_*>(s0), static_cast<T_*>(s1), B, T, C,
          int(K));
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
}

int64_t conv1d_backward_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t K) {
  return B * chunks_of(T) * (K + 1) * C;
}

void conv1d_backward(DType t, const void* x, const void* w, const void* bias, const void* s0,
                     bool silu, const void* dy, const void* ds1, void* dx, float* dw, float* dbias,
                     void* ds0, float* scratch, int64_t B, int64_t T, int64_t C, int64_t K,
                     cudaStream_t s) {
  if (C == 0) return;
  const int64_t parts = B * chunks_of(T);
  if (B > 0) {
    dispatch(t, C, K, {x, dy, dx}, [&](auto tag, auto vc_c, auto k_c) {
      using T_ = decltype(tag);
      constexpr int VC = decltype(vc_c)::value, KK = decltype(k_c)::value;
      conv_bwd_kernel<T_, VC, KK><<<tile_grid(B, T, C, VC), kThreads, 0, s>>>(
          static_cast<const T_*>(x), static_cast<const T_*>(w), static_cast<const T_*>(bias),
          static_cast<const T_*>(s0), silu, static_cast<const T_*>(dy),
          static_cast<const T_*>(ds1), static_cast<T_*>(dx), static_cast<T_*>(ds0), scratch, T,
          C);
      AMOR_CUDA_CHECK_LAUNCH();
    });
  }
  column_sum(scratch, parts, (K + 1) * C, dw, K * C, dbias, s);
}

void conv1d_step(DType t, const void* x_t, void* state, const void* w, const void* bias,
                 bool silu, void* y_t, int64_t B, int64_t C, int64_t K, cudaStream_t s) {
  if (B * C == 0) return;
  dispatch_storage(t, "cuda conv1d_step", [&](auto tag) {
    using T_ = decltype(tag);
    conv_step_kernel<T_><<<grid_for(B * C, 256), 256, 0, s>>>(
        static_cast<const T_*>(x_t), static_cast<T_*>(state), static_cast<const T_*>(w),
        static_cast<const T_*>(bias), silu, static_cast<T_*>(y_t), B, C, int(K));
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace amor::cuda
