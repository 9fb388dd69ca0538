// AMOR's gate on the GPU (math as amor_gate_ref.h), nothing read back to the host.
//
// entropy_stats: the lower median by a radix select and the unbiased std, in kSelectPasses + 1
// launches over a fixed grid of G blocks (G from n alone, so a given n always reduces in the same
// order, on any GPU):
//   - keys: a float's bits mapped so that unsigned order is float order (negatives flipped), so
//     the k-th smallest key is the k-th smallest value and the median is exactly one of the inputs;
//   - pass p (0..7) counts, per block, the 4-bit digit p (from the top) of the keys whose higher
//     digits equal the prefix selected so far: 16 counters per thread in registers, summed over
//     the block (no atomics: counts are integers and the sums fixed-order anyway). Pass p first
//     resolves digit p-1 from the previous pass's per-block counts: every block sums them the same
//     way and reaches the same prefix and remaining rank k, which block 0 records for pass p+1;
//   - the std rides along: pass 0 adds up the values per block (double), pass 1 derives the mean
//     from those partials (every block the same fixed-order sum) and adds up (x - mean)^2;
//   - a last one-block launch resolves digit 7 (the median's key) and folds the squares.
// n up to ~1M (B*T of a micro-batch times ranks) is 9 reads of at most 4 MB, from L2.
//
// amor_gate_update: one thread; the EMA and tau as the cpu writes them, each product and sum
// rounded on its own (__dmul_rn, __dadd_rn: nvcc would otherwise contract them into FMAs, which
// round once and differ from the cpu in the last bit).
// amor_gate_mask: gate_i = 1[double(H_i) > tau], tau read from the device state.
#include "kernels/amor_gate/amor_gate_cuda.h"
#include "kernels/cast/cuda_device.cuh"

namespace amor::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kDigitBits = 4;
constexpr int kBins = 1 << kDigitBits;
constexpr int kSelectPasses = 32 / kDigitBits;
constexpr int64_t kMaxBlocks = 256;
constexpr int64_t kPerThread = 16;  // values per thread before another block is worth launching

int64_t stat_blocks(int64_t n) {
  const int64_t want = ceil_div(n, kThreads * kPerThread);
  return want < 1 ? 1 : (want > kMaxBlocks ? kMaxBlocks : want);
}

// Scratch layout: partial sums [G] and squares [G] (double), counts [passes][G][bins], the
// selection after each digit [passes][2] (prefix, rank).
struct Scratch {
  double* sum;
  double* sq;
  uint32_t* counts;
  uint32_t* sel;
};

Scratch carve(void* base, int64_t G) {
  Scratch s;
  s.sum = static_cast<double*>(base);
  s.sq = s.sum + G;
  s.counts = reinterpret_cast<uint32_t*>(s.sq + G);
  s.sel = s.counts + kSelectPasses * G * kBins;
  return s;
}

__device__ __forceinline__ uint32_t float_key(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if (u == 0x80000000u) u = 0;  // -0 sorts with +0 (they compare equal on the cpu)
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_float(uint32_t k) {
  const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}

__device__ __forceinline__ double quiet_nan() {
  const uint64_t bits = 0x7ff8000000000000ull;
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

__device__ __forceinline__ double mul_rn(double a, double b) {
#ifdef AMOR_CUDA_EMU
  return a * b;  // the emulator's host compiler (x86-64, no -mfma) never fuses
#else
  return __dmul_rn(a, b);
#endif
}

__device__ __forceinline__ double add_rn(double a, double b) {
#ifdef AMOR_CUDA_EMU
  return a + b;
#else
  return __dadd_rn(a, b);
#endif
}

// The sum over the G partials, in the same order in every block that calls it.
__device__ double fold_partials(const double* partial, int64_t G, double* scratch) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < G; i += blockDim.x) acc += partial[i];
  return block_sum(acc, scratch);
}

// Resolves one digit: from the per-block counts of the digit under `shift` among the keys that
// match prefix so far, the digit holding rank k. Every thread gets the new (prefix, k).
__device__ void resolve_digit(const uint32_t* counts, int64_t G, int shift, uint32_t& prefix,
                              uint32_t& k) {
  __shared__ uint32_t total[kBins];
  __shared__ uint32_t result[2];
  if (threadIdx.x < kBins) {
    uint32_t t = 0;
    for (int64_t g = 0; g < G; ++g) t += counts[g * kBins + threadIdx.x];
    total[threadIdx.x] = t;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t below = 0;
    int b = 0;
    for (; b < kBins - 1; ++b) {
      if (k < below + total[b]) break;
      below += total[b];
    }
    result[0] = prefix | (uint32_t(b) << shift);
    result[1] = k - below;
  }
  __syncthreads();
  prefix = result[0];
  k = result[1];
  __syncthreads();  // result and total may be written again by the next call
}

// Pass p: resolve digit p-1 (p > 0), count digit p of the matching keys; std partials in passes
// 0 (sums) and 1 (squares about the mean).
__global__ void __launch_bounds__(kThreads)
    select_pass_kernel(const float* __restrict__ x, int64_t n, int p, uint32_t k0, Scratch sc) {
  __shared__ double dscratch[32];
  __shared__ uint32_t sum_counts[kBins][kThreads + 1];  // +1: the per-bin sums read across banks
  const int64_t G = gridDim.x;
  uint32_t prefix = 0, k = k0;
  if (p > 0) {
    if (p >= 2) {
      prefix = sc.sel[2 * (p - 2)];
      k = sc.sel[2 * (p - 2) + 1];
    }
    resolve_digit(sc.counts + int64_t(p - 1) * G * kBins, G, 32 - kDigitBits * p, prefix, k);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      sc.sel[2 * (p - 1)] = prefix;
      sc.sel[2 * (p - 1) + 1] = k;
    }
  }
  double mean = 0.0;
  if (p == 1) mean = fold_partials(sc.sum, G, dscratch) / double(n);

  const int shift = 32 - kDigitBits * (p + 1);
  const int high = kDigitBits * p;  // bits already selected
  uint32_t c[kBins];
#pragma unroll
  for (int b = 0; b < kBins; ++b) c[b] = 0;
  double acc = 0.0;
  const int64_t stride = G * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    const uint32_t key = float_key(v);
    if (p == 0) {
      acc += double(v);
    } else if (p == 1) {
      const double d = double(v) - mean;
      acc += d * d;
    }
    if (high > 0 && (key >> (32 - high)) != (prefix >> (32 - high))) continue;
    const uint32_t digit = (key >> shift) & (kBins - 1);
#pragma unroll
    for (int b = 0; b < kBins; ++b) c[b] += digit == uint32_t(b) ? 1u : 0u;
  }
#pragma unroll
  for (int b = 0; b < kBins; ++b) sum_counts[b][threadIdx.x] = c[b];
  if (p <= 1) {
    acc = block_sum(acc, dscratch);  // ends with a barrier: sum_counts is complete too
    if (threadIdx.x == 0) (p == 0 ? sc.sum : sc.sq)[blockIdx.x] = acc;
  } else {
    __syncthreads();
  }
  if (threadIdx.x < kBins) {
    uint32_t t = 0;
    for (int j = 0; j < kThreads; ++j) t += sum_counts[threadIdx.x][j];
    sc.counts[(int64_t(p) * G + blockIdx.x) * kBins + threadIdx.x] = t;
  }
}

// One block: the last digit gives the median's key; the squares fold into the std.
__global__ void __launch_bounds__(kThreads)
    stats_final_kernel(int64_t n, int64_t G, Scratch sc, double* out) {
  __shared__ double dscratch[32];
  uint32_t prefix = sc.sel[2 * (kSelectPasses - 2)], k = sc.sel[2 * (kSelectPasses - 2) + 1];
  resolve_digit(sc.counts + int64_t(kSelectPasses - 1) * G * kBins, G, 0, prefix, k);
  const double ss = fold_partials(sc.sq, G, dscratch);
  if (threadIdx.x == 0) {
    out[0] = double(key_float(prefix));
    out[1] = n < 2 ? quiet_nan() : sqrt(ss / double(n - 1));
  }
}

__global__ void gate_update_kernel(const double* state, const double* stats, ref::AmorGateRule r,
                                   double* out) {
  const double mu = r.momentum, rest = 1.0 - mu;
  const double median = stats[0], sd = stats[1];
  const double m = add_rn(mul_rn(mu, state[ref::kGateM]), mul_rn(rest, median));
  double s = state[ref::kGateS];
  if (r.adaptive && sd == sd) s = add_rn(mul_rn(mu, s), mul_rn(rest, sd));  // sd == sd: not NaN
  out[ref::kGateM] = m;
  out[ref::kGateS] = s;
  out[ref::kGateTau] = r.adaptive ? add_rn(m, mul_rn(r.kappa, s)) : add_rn(m, r.fixed_offset);
}

__global__ void gate_mask_kernel(const float* __restrict__ H, int64_t n, const double* state,
                                 uint8_t* __restrict__ gate) {
  const double tau = state[ref::kGateTau];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    gate[i] = double(H[i]) > tau ? 1 : 0;
}

}  // namespace

int64_t entropy_stats_scratch_bytes(int64_t n) {
  const int64_t G = stat_blocks(n);
  return 2 * G * int64_t(sizeof(double)) +
         (kSelectPasses * G * kBins + 2 * kSelectPasses) * int64_t(sizeof(uint32_t));
}

void entropy_stats(const float* x, int64_t n, void* scratch, double* out, cudaStream_t s) {
  const int64_t G = stat_blocks(n);
  const Scratch sc = carve(scratch, G);
  const uint32_t k0 = uint32_t((n - 1) / 2);  // the lower middle value's rank
  for (int p = 0; p < kSelectPasses; ++p) {
    select_pass_kernel<<<unsigned(G), kThreads, 0, s>>>(x, n, p, k0, sc);
    AMOR_CUDA_CHECK_LAUNCH();
  }
  stats_final_kernel<<<1, kThreads, 0, s>>>(n, G, sc, out);
  AMOR_CUDA_CHECK_LAUNCH();
}

void amor_gate_update(const double* state, const double* stats, const ref::AmorGateRule& rule,
                      double* out, cudaStream_t s) {
  gate_update_kernel<<<1, 1, 0, s>>>(state, stats, rule, out);
  AMOR_CUDA_CHECK_LAUNCH();
}

void amor_gate_mask(const float* H, int64_t n, const double* state, uint8_t* gate,
                    cudaStream_t s) {
  if (n == 0) return;
  gate_mask_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(H, n, state, gate);
  AMOR_CUDA_CHECK_LAUNCH();
}

}  // namespace amor::cuda
