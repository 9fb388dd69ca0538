// A CPU emulation of the part of CUDA that the memory-bound kernels use, so that their logic
// (indexing, tails, reductions, barriers, warp shuffles) can be checked on a machine without a GPU.
// A development tool, not a backend: run_parity_emulated.sh force-includes this header into the
// .cu sources (rewritten by to_cpp.py: kernel launches become emu::launch calls) compiled as C++,
// and links them with the real parity test (and, with --bench, the bench-ops command).
//
// How it emulates: the blocks of a launch run one after another; the threads of a block are real
// threads, so __syncthreads is a barrier of the block's threads and a warp shuffle is an exchange
// through a per-warp buffer between two barriers of the warp's threads. The tensor-core helpers of
// kernels/core/mma.cuh (mma m16n8k16 bf16 -> f32, ldmatrix x4 (.trans), cp.async) are emulated
// the same way: lanes publish their fragments or row addresses, and each computes its own part. Static __shared__ arrays
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

// kernels/core/mma.cuh switches to the emulated tensor-core helpers below.
#define AMOR_CUDA_EMU 1

namespace emu {

inline constexpr int kWarpWords = 8;  // words per lane in Ctx::words (an mma's a[4] and b[2])

// What a CUDA thread knows about itself, per emulating thread.
struct Ctx {
  dim3 tid, bid, bdim, gdim;
  std::barrier<>* block = nullptr;
  std::barrier<>* warp = nullptr;
  double* slots = nullptr;  // the warp's exchange buffer
  uint64_t* words = nullptr;  // the warp's exchange buffer of raw words, kWarpWords per lane
  int lane = 0;
  char* dyn = nullptr;      // dynamic shared memory of the block
};
extern thread_local Ctx ctx;
extern std::mutex atomic_mu;

inline void syncthreads() { ctx.block->arrive_and_wait(); }
inline void syncwarp() { ctx.warp->arrive_and_wait(); }  // __syncwarp of all 32 lanes

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
        std::vector<uint64_t> words(size_t(nwarps) * 32 * kWarpWords);
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
            ctx.words = words.data() + size_t(t / 32) * 32 * kWarpWords;
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

// ---- tensor cores (kernels/core/mma.cuh documents the fragment layouts emulated here). Each lane
// publishes its registers in the warp's word buffer, the warp meets at a barrier, each lane
// computes its own result from everyone's registers, and a second barrier frees the buffer.

inline float bf16_bits_to_float(uint32_t bits16) {
  const uint32_t u = bits16 << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Element `half` (0: lower 16 bits) of lane `lane`'s word `w`.
inline float warp_bf16(int lane, int w, int half) {
  return bf16_bits_to_float(uint32_t(ctx.words[lane * kWarpWords + w] >> (16 * half)) & 0xffffu);
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d += A B. Products of bf16 are exact in
// double and the 16-term sum is exact there too; the result is rounded once to f32 (the tensor
// core truncates its internal sum differently in the last bits).
inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  uint64_t* mine = ctx.words + ctx.lane * kWarpWords;
  for (int i = 0; i < 4; ++i) mine[i] = a[i];
  mine[4] = b[0];
  mine[5] = b[1];
  ctx.warp->arrive_and_wait();
  auto A = [](int r, int k) {  // a[(r >= 8) + 2 (k >= 8)] of lane 4 (r % 8) + (k % 8) / 2
    return warp_bf16(4 * (r % 8) + (k % 8) / 2, (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0), k % 2);
  };
  auto B = [](int k, int n) {  // b[k >= 8] of lane 4 n + (k % 8) / 2
    return warp_bf16(4 * n + (k % 8) / 2, 4 + (k >= 8 ? 1 : 0), k % 2);
  };
  const int g = ctx.lane / 4, t = ctx.lane % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i % 2);
    double s = 0;
    for (int k = 0; k < 16; ++k) s += double(A(r, k)) * double(B(k, n));
    out[i] = float(double(d[i]) + s);
  }
  ctx.warp->arrive_and_wait();
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8m .. 8m+7 address the rows of matrix m.
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  ctx.words[ctx.lane * kWarpWords] = reinterpret_cast<uint64_t>(row);
  ctx.warp->arrive_and_wait();
  const int g = ctx.lane / 4, t = ctx.lane % 4;
  uint32_t out[4];
  for (int m = 0; m < 4; ++m) {
    auto at = [&](int rr, int cc) {  // element (rr, cc) of matrix m, raw 16 bits
      const auto* p = reinterpret_cast<const uint16_t*>(ctx.words[(8 * m + rr) * kWarpWords]);
      return uint32_t(p[cc]);
    };
    out[m] = trans ? at(2 * t, g) | (at(2 * t + 1, g) << 16) : at(g, 2 * t) | (at(g, 2 * t + 1) << 16);
  }
  ctx.warp->arrive_and_wait();
  for (int m = 0; m < 4; ++m) r[m] = out[m];
}

// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lanes 8m .. 8m+7 address the rows of matrix m;
// lane (g, t)'s r[m] holds M_m[2t][g] (low half) and M_m[2t+1][g].
inline void stmatrix_x4_trans(void* row, const uint32_t (&r)[4]) {
  uint64_t* w = ctx.words + ctx.lane * kWarpWords;
  w[0] = reinterpret_cast<uint64_t>(row);
  for (int m = 0; m < 4; ++m) w[1 + m] = r[m];
  ctx.warp->arrive_and_wait();
  // This lane writes row rr = lane % 8 of matrix m = lane / 8: M_m[rr][cc] comes from lane
  // (g = cc, t = rr / 2), half rr % 2 of its r[m].
  const int m = ctx.lane / 8, rr = ctx.lane % 8;
  uint16_t out[8];
  for (int cc = 0; cc < 8; ++cc) {
    const uint64_t v = ctx.words[(4 * cc + rr / 2) * kWarpWords + 1 + m];
    out[cc] = uint16_t(uint32_t(v) >> (16 * (rr % 2)));
  }
  ctx.warp->arrive_and_wait();  // every lane has read the words before any reuses them
  std::memcpy(row, out, 16);  // this lane's own row address
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
// Device memory is host memory: report 64 GiB free of 64 GiB (the OOM message's numbers).
inline cudaError_t mem_info_(size_t* free, size_t* total) {
  *free = *total = size_t(64) << 30;
  return cudaSuccess;
}
// Stream capture (CUDA graphs of decode steps): nothing is ever capturing here, and a capture or
// a graph is not supported.
inline cudaError_t is_capturing_(cudaStream_t, cudaStreamCaptureStatus* s) {
  *s = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
template <class... A>
cudaError_t unsupported_(A&&...) {
  return cudaErrorNotSupported;
}

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
#define cudaMemGetInfo ::emu::mem_info_
#define cudaStreamIsCapturing ::emu::is_capturing_
#define cudaStreamBeginCapture ::emu::unsupported_
#define cudaStreamEndCapture ::emu::unsupported_
#define cudaGraphInstantiate ::emu::unsupported_
#define cudaGraphLaunch ::emu::unsupported_
#define cudaGraphDestroy ::emu::ok_
#define cudaGraphExecDestroy ::emu::ok_

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
