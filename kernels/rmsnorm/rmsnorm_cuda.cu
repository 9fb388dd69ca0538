// RMSNorm on the GPU, plain and gated with per-group statistics (math as rmsnorm_ref.h and
// rmsnorm_gated_ref.h), computed in f32. Per row of [rows, d], groups of `group` channels:
//
//   u   = x                  (None, NormBeforeGate)     u = x * silu(z)   (GateBeforeNorm)
//   a   = silu(z)            (NormBeforeGate)           a = 1             (otherwise)
//   r   = 1 / sqrt(mean_{group} u^2 + eps)              saved as rstd[row, group], f32
//   y   = u * r * w * a
// Backward, g = dy * w * a, uh = u * r:
//   du  = r * (g - uh * mean_{group}(g * uh))
//   dx  = du                          dz = dy * w * uh * silu'(z)      (NormBeforeGate)
//   dx  = du * silu(z)                dz = du * x * silu'(z)           (GateBeforeNorm)
//   dw  = sum over rows of dy * uh * a
//   silu'(z) = s (1 + z (1 - s)),  s = sigmoid(z)
//
// Layout: one block per row at a time (grid-stride over rows). Thread t owns the V-element
// vectors t, t + blockDim, ... of the row (16-byte accesses when the group size and alignment
// allow). A row is two passes: pass 1 writes each vector's partial sum to shared memory, one warp
// per group folds its vectors in a fixed order, pass 2 re-reads the row (now in L1) and writes
// the outputs. In the backward each thread also accumulates dw for the channels it owns in shared
// memory; at the end every block writes its partial dw row to the scratch and column_sum adds
// the blocks' rows in a fixed order. No atomics: the same inputs give the same bits on every run.
#include "kernels/cast/cuda_device.cuh"
#include "kernels/rmsnorm/rmsnorm_cuda.h"

namespace amor::cuda {
namespace {

constexpr int kMaxThreads = 512;

__device__ __forceinline__ float sigmoidf(float z) { return 1.0f / (1.0f + expf(-z)); }

// The channels' u = x or x * silu(z) (GateBeforeNorm) and gate factor a = silu(z) or 1.
template <int V, NormGate kGate>
__device__ __forceinline__ void gate_terms(const float (&vx)[V], const float (&vz)[V],
                                           float (&u)[V], float (&a)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float silu = kGate == NormGate::None ? 0.0f : vz[k] * sigmoidf(vz[k]);
    u[k] = kGate == NormGate::GateBeforeNorm ? vx[k] * silu : vx[k];
    a[k] = kGate == NormGate::NormBeforeGate ? silu : 1.0f;
  }
}

template <class T, int V, NormGate kGate>
__device__ __forceinline__ void load_row_vec(const T* x, const T* z, int64_t i, float (&vx)[V],
                                             float (&vz)[V]) {
  load_vec<T, V>(x + i, vx);
  if constexpr (kGate != NormGate::None) {
    load_vec<T, V>(z + i, vz);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) vz[k] = 0.0f;
  }
}

// Shared memory: part[nvec] per-vector sums, then one float per group.
template <class T, int V, NormGate kGate>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ z, const T* __restrict__ w,
                       T* __restrict__ y, float* __restrict__ rstd, int64_t rows, int d,
                       int group, float eps) {
  extern __shared__ float smem[];
  const int nvec = d / V, gvec = group / V, groups = d / group;
  float* part = smem;
  float* grstd = smem + nvec;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * d;
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      float vx[V], vz[V], u[V], a[V];
      load_row_vec<T, V, kGate>(x, z, base + int64_t(v) * V, vx, vz);
      gate_terms<V, kGate>(vx, vz, u, a);
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < V; ++k) s += u[k] * u[k];
      part[v] = s;
    }
    __syncthreads();
    for (int gi = warp; gi < groups; gi += nwarps) {
      float s = 0.0f;
      for (int i = lane; i < gvec; i += 32) s += part[gi * gvec + i];
      s = warp_sum(s);
      if (lane == 0) {
        const float r = 1.0f / sqrtf(s / float(group) + eps);
        grstd[gi] = r;
        rstd[row * groups + gi] = r;
      }
    }
    __syncthreads();
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      const float r = grstd[v / gvec];
      float vx[V], vz[V], u[V], a[V], vw[V];
      load_row_vec<T, V, kGate>(x, z, base + int64_t(v) * V, vx, vz);
      load_vec<T, V>(w + int64_t(v) * V, vw);
      gate_terms<V, kGate>(vx, vz, u, a);
#pragma unroll
      for (int k = 0; k < V; ++k) u[k] = u[k] * r * vw[k] * a[k];
      store_vec<T, V>(y + base + int64_t(v) * V, u);
    }
    // No barrier needed here: the next row writes part[] before its first barrier, and every
    // thread has passed this row's second barrier (so finished reading part[]); grstd[] is next
    // written after the next row's first barrier, which every thread reaches only after pass 2.
  }
}

// Shared memory: part[nvec], then one float per group, then dwacc[d] (element k of vector v at
// k * nvec + v, so that neighbouring threads touch neighbouring banks).
template <class T, int V, NormGate kGate>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_bwd_kernel(const T* __restrict__ x, const T* __restrict__ z, const T* __restrict__ w,
                       const float* __restrict__ rstd, const T* __restrict__ dy,
                       T* __restrict__ dx, T* __restrict__ dz, float* __restrict__ dw_partial,
                       int64_t rows, int d, int group) {
  extern __shared__ float smem[];
  const int nvec = d / V, gvec = group / V, groups = d / group;
  float* part = smem;
  float* gmean = smem + nvec;
  float* dwacc = smem + nvec + groups;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int v = threadIdx.x; v < nvec; v += blockDim.x)
#pragma unroll
    for (int k = 0; k < V; ++k) dwacc[k * nvec + v] = 0.0f;

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * d;
    const float* rrow = rstd + row * groups;
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      const int64_t i = base + int64_t(v) * V;
      const float r = rrow[v / gvec];
      float vx[V], vz[V], u[V], a[V], vw[V], vg[V];
      load_row_vec<T, V, kGate>(x, z, i, vx, vz);
      load_vec<T, V>(w + int64_t(v) * V, vw);
      load_vec<T, V>(dy + i, vg);
      gate_terms<V, kGate>(vx, vz, u, a);
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float uh = u[k] * r;
        s += vg[k] * vw[k] * a[k] * uh;
        dwacc[k * nvec + v] += vg[k] * uh * a[k];
      }
      part[v] = s;
    }
    __syncthreads();
    for (int gi = warp; gi < groups; gi += nwarps) {
      float s = 0.0f;
      for (int i = lane; i < gvec; i += 32) s += part[gi * gvec + i];
      s = warp_sum(s);
      if (lane == 0) gmean[gi] = s / float(group);
    }
    __syncthreads();
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
      const int64_t i = base + int64_t(v) * V;
      const int gi = v / gvec;
      const float r = rrow[gi], mean = gmean[gi];
      float vx[V], vz[V], u[V], a[V], vw[V], vg[V], ox[V], oz[V];
      load_row_vec<T, V, kGate>(x, z, i, vx, vz);
      load_vec<T, V>(w + int64_t(v) * V, vw);
      load_vec<T, V>(dy + i, vg);
      gate_terms<V, kGate>(vx, vz, u, a);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float uh = u[k] * r;
        const float du = r * (vg[k] * vw[k] * a[k] - uh * mean);
        if constexpr (kGate == NormGate::None) {
          ox[k] = du;
          oz[k] = 0.0f;
        } else {
          const float s = sigmoidf(vz[k]);
          const float dsilu = s * (1.0f + vz[k] * (1.0f - s));
          if constexpr (kGate == NormGate::NormBeforeGate) {
            ox[k] = du;
            oz[k] = vg[k] * vw[k] * uh * dsilu;
          } else {
            ox[k] = du * (vz[k] * s);
            oz[k] = du * vx[k] * dsilu;
          }
        }
      }
      store_vec<T, V>(dx + i, ox);
      if constexpr (kGate != NormGate::None) store_vec<T, V>(dz + i, oz);
    }
    // Barrier-free row change: as in the forward (part[] and gmean[] are rewritten only after
    // barriers every thread reaches after its last read); dwacc entries are thread-private.
  }
  for (int v = threadIdx.x; v < nvec; v += blockDim.x)
#pragma unroll
    for (int k = 0; k < V; ++k)
      dw_partial[int64_t(blockIdx.x) * d + v * V + k] = dwacc[k * nvec + v];
}

// Threads per block: one per vector of the row, rounded up to whole warps, at most kMaxThreads.
int threads_for(int nvec) {
  int t = (nvec + 31) / 32 * 32;
  return t < 32 ? 32 : (t > kMaxThreads ? kMaxThreads : t);
}

// Blocks of the backward: a fixed number (one partial dw row each), at most one per row.
int64_t backward_blocks(int64_t rows) {
  const int64_t cap = int64_t(num_sms()) * 4;
  const int64_t b = rows < cap ? rows : cap;
  return b < 1 ? 1 : b;
}

template <class Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)  // above the default limit a kernel must opt in
    AMOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
}

// Calls f(T{}, integral_constant V, integral_constant gate) for the dtype, vector width and gate.
template <class F>
void dispatch(DType t, NormGate gate, bool vectorise, F&& f) {
  dispatch_storage(t, "cuda rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    auto with_gate = [&](auto v) {
      switch (gate) {
        case NormGate::None:
          f(T{}, v, std::integral_constant<NormGate, NormGate::None>{});
          break;
        case NormGate::NormBeforeGate:
          f(T{}, v, std::integral_constant<NormGate, NormGate::NormBeforeGate>{});
          break;
        case NormGate::GateBeforeNorm:
          f(T{}, v, std::integral_constant<NormGate, NormGate::GateBeforeNorm>{});
          break;
      }
    };
    if (vectorise) {
      with_gate(std::integral_constant<int, kVec16<T>>{});
    } else {
      with_gate(std::integral_constant<int, 1>{});
    }
  });
}

bool can_vectorise(DType t, int64_t group, std::initializer_list<const void*> ptrs) {
  const int64_t v = 16 / int64_t(dtype_size(t));
  if (group % v != 0) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

}  // namespace

void rmsnorm_forward(DType t, NormGate gate, const void* x, const void* z, const void* w, void* y,
                     float* rstd, int64_t rows, int64_t d, int64_t group, double eps,
                     cudaStream_t s) {
  if (rows == 0) return;
  const bool vec = can_vectorise(t, group, {x, z, w, y});
  dispatch(t, gate, vec, [&](auto tag, auto v_c, auto gate_c) {
    using T = decltype(tag);
    constexpr int V = decltype(v_c)::value;
    constexpr NormGate G = decltype(gate_c)::value;
    const int nvec = int(d / V);
    const size_t smem = sizeof(float) * size_t(nvec + d / group);
    auto kernel = rmsnorm_fwd_kernel<T, V, G>;
    set_smem(kernel, smem);
    const int64_t cap = int64_t(num_sms()) * 8;
    const unsigned grid = unsigned(rows < cap ? rows : cap);
    kernel<<<grid, threads_for(nvec), smem, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(z), static_cast<const T*>(w),
        static_cast<T*>(y), rstd, rows, int(d), int(group), float(eps));
    AMOR_CUDA_CHECK_LAUNCH();
  });
}

int64_t rmsnorm_backward_scratch_floats(int64_t rows, int64_t d) {
  return backward_blocks(rows) * d;
}

void rmsnorm_backward(DType t, NormGate gate, const void* x, const void* z, const void* w,
                      const float* rstd, const void* dy, void* dx, void* dz, float* dw,
                      float* scratch, int64_t rows, int64_t d, int64_t group, cudaStream_t s) {
  const bool vec = can_vectorise(t, group, {x, z, w, dy, dx, dz});
  const int64_t blocks = backward_blocks(rows);
  dispatch(t, gate, vec, [&](auto tag, auto v_c, auto gate_c) {
    using T = decltype(tag);
    constexpr int V = decltype(v_c)::value;
    constexpr NormGate G = decltype(gate_c)::value;
    const int nvec = int(d / V);
    const size_t smem = sizeof(float) * size_t(nvec + d / group + d);
    auto kernel = rmsnorm_bwd_kernel<T, V, G>;
    set_smem(kernel, smem);
    kernel<<<unsigned(blocks), threads_for(nvec), smem, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(z), static_cast<const T*>(w), rstd,
        static_cast<const T*>(dy), static_cast<T*>(dx), static_cast<T*>(dz), scratch, rows,
        int(d), int(group));
    AMOR_CUDA_CHECK_LAUNCH();
  });
  column_sum(scratch, blocks, d, dw, d, nullptr, s);
}

}  // namespace amor::cuda
