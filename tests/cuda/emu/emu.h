// A CPU emulation of the part of CUDA that the memory-bound kernels use, so that their logic
// (indexing, tails, reductions, barriers, warp shuffles) can be checked on a machine without a GPU.
// A development tool, not a backend: run_parity_emulated.sh force-includes this header into the
// .cu sources (rewritten by to_cpp.py: kernel launches become emu::launch calls) compiled as C++,
// and links them with the real parity test (and, with --bench, the bench-ops command).
//
// How it emulates: the blocks of a launch run one after another; the threads of a block are real
// threads, so __syncthreads is a barrier of the block's threads and a warp shuffle is an exchange
// through a per-warp buffer between two barriers of the warp's threads. Static __shared__ arrays
// become function-local statics (one block at a time uses them); dynamic shared memory is a buffer
// filled with garbage per block. Device memory is host memory (filled with garbage when
// allocated), the runtime calls are plain memset/memcpy, atomics take one lock. What it cannot
// show: races between blocks, timing, and the GPU's own rounding (expf, sincosf and rsqrt differ in
// the last bits from the host's, so f32 results here can match the cpu exactly where the GPU will
// be a few ulps off).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// Host compilers see the CUDA keywords as nothing; shared arrays must be shared by the block's
// threads, which a function-local static is (blocks run one at a time).
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

namespace emu {

// What a CUDA thread knows about itself, per emulating thread.
struct Ctx {
  dim3 tid, bid, bdim, gdim;
  std::barrier<>* block = nullptr;
  std::barrier<>* warp = nullptr;
  double* slots = nullptr;  // the warp's exchange buffer
  int lane = 0;
  char* dyn = nullptr;      // dynamic shared memory of the block
};
extern thread_local Ctx ctx;
extern std::mutex atomic_mu;

inline void syncthreads() { ctx.block->arrive_and_wait(); }

template <class T>
T shfl_xor(T v, int lane_mask) {
  ctx.slots[ctx.lane] = double(v);  // exact for float and double
  ctx.warp->arrive_and_wait();
  const T r = T(ctx.slots[ctx.lane ^ lane_mask]);
  ctx.warp->arrive_and_wait();
  return r;
}

template <class T>
T* dyn_smem() {
  return reinterpret_cast<T*>(ctx.dyn);
}

inline dim3 to_dim3(dim3 d) { return d; }
inline dim3 to_dim3(unsigned v) { return dim3(v); }
inline dim3 to_dim3(int v) { return dim3(unsigned(v)); }
inline dim3 to_dim3(long v) { return dim3(unsigned(v)); }

// kernel<<<grid, block, smem, stream>>>(args) becomes launch(grid, block, smem, stream,
// [=] { kernel(args); }).
template <class G, class B, class F>
void launch(G grid_arg, B block_arg, size_t smem, cudaStream_t, F body) {
  const dim3 grid = to_dim3(grid_arg), block = to_dim3(block_arg);
  const int nthreads = int(block.x * block.y * block.z);
  if (nthreads <= 0 || nthreads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535) {
    std::fprintf(stderr, "emu: invalid launch: grid (%u,%u,%u), block (%u,%u,%u)\n", grid.x,
                 grid.y, grid.z, block.x, block.y, block.z);
    std::abort();
  }
  const int nwarps = (nthreads + 31) / 32;
  std::vector<char> dyn(smem + 64);
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::memset(dyn.data(), 0xA5, dyn.size());
        std::barrier<> bar(nthreads);
        std::vector<std::unique_ptr<std::barrier<>>> warp_bars;
        for (int w = 0; w < nwarps; ++w)
          warp_bars.push_back(std::make_unique<std::barrier<>>(std::min(32, nthreads - 32 * w)));
        std::vector<double> slots(size_t(nwarps) * 32);
        std::vector<std::thread> threads;
        threads.reserve(nthreads);
        for (int t = 0; t < nthreads; ++t) {
          threads.emplace_back([&, t] {
            ctx.tid = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
            ctx.bid = dim3(bx, by, bz);
            ctx.bdim = block;
            ctx.gdim = grid;
            ctx.block = &bar;
            ctx.warp = warp_bars[t / 32].get();
            ctx.slots = slots.data() + (t / 32) * 32;
            ctx.lane = t % 32;
            ctx.dyn = dyn.data();
            body();
            // A finished thread no longer takes part in barriers (as on the GPU).
            ctx.block->arrive_and_drop();
            ctx.warp->arrive_and_drop();
          });
        }
        for (std::thread& th : threads) th.join();
      }
    }
  }
}

// The runtime API on host memory.
cudaError_t malloc_(void** p, size_t bytes);
inline cudaError_t free_(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t memset_(void* p, int v, size_t n, cudaStream_t = nullptr) {
  std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t memcpy_(void* d, const void* s, size_t n, cudaMemcpyKind,
                           cudaStream_t = nullptr) {
  std::memmove(d, s, n);
  return cudaSuccess;
}
template <class... A>
cudaError_t ok_(A&&...) {
  return cudaSuccess;
}
inline cudaError_t device_count_(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t get_device_(int* d) {
  *d = 0;
  return cudaSuccess;
}
// Two multiprocessors: grids sized from the SM count stay small, so launches stay cheap.
inline cudaError_t attribute_(int* v, cudaDeviceAttr, int) {
  *v = 2;
  return cudaSuccess;
}
inline const char* error_string_(cudaError_t) { return "emulated CUDA error"; }
// Events read the host clock (all emulated work is synchronous).
cudaError_t event_create_(cudaEvent_t* e);
cudaError_t event_destroy_(cudaEvent_t e);
cudaError_t event_record_(cudaEvent_t e, cudaStream_t = nullptr);
cudaError_t event_elapsed_(float* ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t device_properties_(cudaDeviceProp* p, int device);

}  // namespace emu

#define threadIdx (::emu::ctx.tid)
#define blockIdx (::emu::ctx.bid)
#define blockDim (::emu::ctx.bdim)
#define gridDim (::emu::ctx.gdim)
#define __syncthreads() ::emu::syncthreads()
#define __shfl_xor_sync(mask, v, lane_mask) ::emu::shfl_xor((v), (lane_mask))
#define cudaMalloc(p, n) ::emu::malloc_(reinterpret_cast<void**>(p), (n))
#define cudaFree ::emu::free_
#define cudaMemset ::emu::memset_
#define cudaMemsetAsync ::emu::memset_
#define cudaMemcpy ::emu::memcpy_
#define cudaMemcpyAsync ::emu::memcpy_
#define cudaDeviceSynchronize ::emu::ok_
#define cudaStreamSynchronize ::emu::ok_
#define cudaFuncSetAttribute ::emu::ok_
#define cudaGetLastError ::emu::ok_
#define cudaGetDeviceCount ::emu::device_count_
#define cudaGetDevice ::emu::get_device_
#define cudaDeviceGetAttribute ::emu::attribute_
#define cudaGetErrorString ::emu::error_string_
#define cudaEventCreate ::emu::event_create_
#define cudaEventDestroy ::emu::event_destroy_
#define cudaEventRecord ::emu::event_record_
#define cudaEventSynchronize ::emu::ok_
#define cudaEventElapsedTime ::emu::event_elapsed_
#define cudaGetDeviceProperties ::emu::device_properties_

// Correctly rounded f32 intrinsics: the host's IEEE operations (x86-64 without -mfma never fuses).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

inline float atomicAdd(float* p, float v) {
  std::lock_guard<std::mutex> lock(::emu::atomic_mu);
  const float old = *p;
  *p += v;
  return old;
}
inline float4 atomicAdd(float4* p, float4 v) {
  std::lock_guard<std::mutex> lock(::emu::atomic_mu);
  const float4 old = *p;
  p->x += v.x, p->y += v.y, p->z += v.z, p->w += v.w;
  return old;
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> lock(::emu::atomic_mu);
  const unsigned long long old = *p;
  if (v < old) *p = v;
  return old;
}
