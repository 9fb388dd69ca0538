// bench-gdn: times the gated delta rule's CUDA kernels (forward, backward, forward + backward,
// and the decode step) and compares the scan with causal attention at the same B and T, measured
// in the same run: attention_forward / attention_backward as dispatched (AMOR_ATTENTION, default
// auto: cuDNN's fused flash attention at these dense bf16 shapes, AMOR_ATTENTION=ours our tiles).
//
//   bench-gdn OUT.csv [--reps N] [--only scan|step] [--heads H] [--dk K] [--dv V]
//
// Shapes: B*T = 16K tokens, T in {2K, 4K, 8K, 16K}; by default the 1.5B GDN preset's scan (d 2048:
// H = 24 heads, K = 64, V = 128, chunk 64; --heads, --dk, --dv change it, e.g. H16 K128 V256 as
// flash-linear-attention's benchmarks), q, k, v, do in bf16 (q, k uniform in +-0.2: rows of norm
// about 1, as the model's L2 norm hands them), g and beta in f32, no initial state.
// Attention: q, k, v [B,T,32,64] bf16 (d 2048), causal, no gate. Each time is the median of N
// calls (default 20) between CUDA events after two warm-up calls.
//
// FLOP counts (2 per multiply-add; what each algorithm computes, L x L products counted in full;
// the bf16 tensor-core path skips the zero k blocks of its triangular operands, so for it the
// count is a fixed yardstick, not the multiply-adds issued):
//   GDN forward, per head and chunk of L rows: 2 L^2 (3K + 2V) [K K^T, W, U, Q K^T, P Vn]
//     + 6 L K V [W S, the state update, Q S] + L^3 / 3 [the triangular solve].
//   GDN backward: the forward's prepare and state pass again (2 L^2 (2K + V) + L^3/3 + 4 L K V;
//     counted although the backward after a forward that kept them does not run them),
//     the dS pass (2 L^2 (K + V) + 6 L K V), the q/k kernel (2 L^2 (3K + V) + 6 L K V) and the WY
//     kernel (2 L^2 (4K + 2V) + 4 L^3).
//   Attention (causal, half the T x T scores): forward 2 B H T^2 D, backward 2.5x the forward.
// "vs attn" = GDN time / attention time (below 1: the scan is faster). Decode: the step must read
// and write the f32 state (2 B H K V 4 bytes, plus the small inputs); GB/s against that.
// Prints a table and writes it as CSV (temp + rename). The kernels' variants are chosen by the
// environment (AMOR_GDN_VARIANT, AMOR_GDN_STATE_WARPS, AMOR_GDN_QK, AMOR_GDN_WY:
// gated_delta_cuda_common.cuh),
// read once per process: run the command once per variant.
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/cast/cast.h"
#include "kernels/core/backend.h"
#include "kernels/core/caching_allocator.h"
#include "kernels/core/cuda_check.h"
#include "kernels/core/error.h"
#include "kernels/gated_delta/gated_delta.h"
#include "tests/cuda/bench_util.h"

namespace amor {
namespace {

constexpr int64_t kTokens = 16384, kL = 64;
struct GdnDims {
  int64_t H = 24, K = 64, V = 128;
} gdn;  // the GDN shape (--heads, --dk, --dv)
constexpr int64_t kAttnHeads = 32, kAttnD = 64;

using bench::time_us;

// The FLOP counts of the header comment, for B*T tokens of H heads.
double gdn_forward_flops(double tokens) {
  const double L = kL, K = gdn.K, V = gdn.V;
  const double per_chunk = 2 * L * L * (3 * K + 2 * V) + 6 * L * K * V + L * L * L / 3;
  return tokens / L * gdn.H * per_chunk;
}
double gdn_backward_flops(double tokens) {
  const double L = kL, K = gdn.K, V = gdn.V;
  const double per_chunk = (2 * L * L * (2 * K + V) + L * L * L / 3 + 4 * L * K * V) +
                           (2 * L * L * (K + V) + 6 * L * K * V) +
                           (2 * L * L * (3 * K + V) + 6 * L * K * V) +
                           (2 * L * L * (4 * K + 2 * V) + 4 * L * L * L);
  return tokens / L * gdn.H * per_chunk;
}
double attn_forward_flops(double B, double T) { return 2 * B * kAttnHeads * T * T * kAttnD; }

// A cuda tensor of dtype d with values uniform in [lo, hi).
Tensor dev_uniform(const Shape& shape, uint64_t seed, double lo, double hi, DType d) {
  return bench::random_uniform(shape, d, seed, float(lo), float(hi));
}

struct Row {
  std::string what, shape;
  double us = 0, tflops = 0, attn_us = -1, gbs = -1;
};

std::string ratio_str(const Row& r) {
  if (r.attn_us <= 0) return "n/a";
  char s[32];
  std::snprintf(s, sizeof(s), "%.2f", r.us / r.attn_us);
  return s;
}

void print_row(const Row& r) {
  char attn[32] = "n/a", perf[32] = "", gbs[32] = "";
  if (r.attn_us > 0) std::snprintf(attn, sizeof(attn), "%.1f", r.attn_us);
  if (r.tflops > 0) std::snprintf(perf, sizeof(perf), "%.1f", r.tflops);
  if (r.gbs > 0) std::snprintf(gbs, sizeof(gbs), "%.0f", r.gbs);
  std::printf("%-16s %-22s %11.1f %9s %9s %11s %8s\n", r.what.c_str(), r.shape.c_str(), r.us, perf,
              gbs, attn, ratio_str(r).c_str());
  std::fflush(stdout);
}

// The scan at T (B = kTokens / T) against attention at the same B, T.
void bench_scan(int64_t T, int reps, std::vector<Row>& rows) {
  const int64_t B = kTokens / T;
  const double tokens = double(B * T);
  const Tensor q = dev_uniform({B, T, gdn.H, gdn.K}, 1, -0.2, 0.2, DType::BF16);
  const Tensor k = dev_uniform({B, T, gdn.H, gdn.K}, 2, -0.2, 0.2, DType::BF16);
  const Tensor v = dev_uniform({B, T, gdn.H, gdn.V}, 3, -1.7, 1.7, DType::BF16);
  const Tensor d_o = dev_uniform({B, T, gdn.H, gdn.V}, 4, -1.7, 1.7, DType::BF16);
  const Tensor g = dev_uniform({B, T, gdn.H}, 5, -0.5, -0.001, DType::F32);
  const Tensor beta = dev_uniform({B, T, gdn.H}, 6, 0.05, 0.95, DType::F32);
  const double scale = gated_delta_default_scale(gdn.K);
  // As in training (GdnMixer): the forward keeps its intermediates and the backward reads them;
  // AMOR_GDN_RECOMPUTE=1 times the backward that recomputes them instead (and a forward that
  // keeps nothing). "gdn fwd" alone is the forward that keeps nothing (inference).
  const bool keep = gated_delta_keep_for_backward_default();
  auto fwd = [&] { gated_delta_forward(q, k, v, g, beta, Tensor(), scale, kL); };
  auto fwd_keep = [&] { return gated_delta_forward(q, k, v, g, beta, Tensor(), scale, kL, keep); };
  const Tensor saved = fwd_keep().saved;
  auto bwd = [&](const Tensor& kept) {
    gated_delta_backward(q, k, v, g, beta, Tensor(), scale, d_o, Tensor(), kL, kept);
  };
  Row f{"gdn fwd"}, b{"gdn bwd"}, fb{"gdn fwd+bwd"};
  f.shape = b.shape = fb.shape = "B" + std::to_string(B) + " T" + std::to_string(T) + " H" +
                                 std::to_string(gdn.H) + " K" + std::to_string(gdn.K) + " V" +
                                 std::to_string(gdn.V);
  f.us = time_us(reps, fwd);
  b.us = time_us(reps, [&] { bwd(saved); });
  fb.us = time_us(reps, [&] { bwd(fwd_keep().saved); });
  f.tflops = gdn_forward_flops(tokens) / f.us / 1e6;
  b.tflops = gdn_backward_flops(tokens) / b.us / 1e6;
  fb.tflops = (gdn_forward_flops(tokens) + gdn_backward_flops(tokens)) / fb.us / 1e6;

  // Attention at the same B, T (d 2048 = 32 heads of 64; cuDNN under AMOR_ATTENTION=auto); n/a
  // where its cuda path throws.
  const Shape as{B, T, kAttnHeads, kAttnD};
  try {
    const Tensor aq = dev_uniform(as, 7, -1.7, 1.7, DType::BF16);
    const Tensor ak = dev_uniform(as, 8, -1.7, 1.7, DType::BF16);
    const Tensor av = dev_uniform(as, 9, -1.7, 1.7, DType::BF16);
    const Tensor ado = dev_uniform(as, 10, -1.7, 1.7, DType::BF16);
    const AttentionOutput ao = attention_forward(aq, ak, av);
    const double af = time_us(reps, [&] { attention_forward(aq, ak, av); });
    const double ab =
        time_us(reps, [&] { attention_backward(aq, ak, av, Tensor(), ao.o, ao.lse, ado); });
    const double afb = time_us(reps, [&] {
      const AttentionOutput o = attention_forward(aq, ak, av);
      attention_backward(aq, ak, av, Tensor(), o.o, o.lse, ado);
    });
    f.attn_us = af;
    b.attn_us = ab;
    fb.attn_us = afb;
    Row a{"attn fwd+bwd", "B" + std::to_string(B) + " T" + std::to_string(T) + " H32"};
    a.us = afb;
    a.tflops = 3.5 * attn_forward_flops(double(B), double(T)) / afb / 1e6;
    for (const Row& r : {f, b, fb, a}) print_row(r), rows.push_back(r);
    return;
  } catch (const Error& e) {
    std::printf("(attention on cuda: %s)\n", e.what());
  }
  for (const Row& r : {f, b, fb}) print_row(r), rows.push_back(r);
}

void bench_step(int64_t B, int reps, std::vector<Row>& rows) {
  const Tensor q = dev_uniform({B, gdn.H, gdn.K}, 11, -0.2, 0.2, DType::BF16);
  const Tensor k = dev_uniform({B, gdn.H, gdn.K}, 12, -0.2, 0.2, DType::BF16);
  const Tensor v = dev_uniform({B, gdn.H, gdn.V}, 13, -1.7, 1.7, DType::BF16);
  const Tensor g = dev_uniform({B, gdn.H}, 14, -0.5, -0.001, DType::F32);
  const Tensor beta = dev_uniform({B, gdn.H}, 15, 0.05, 0.95, DType::F32);
  Tensor state = dev_uniform({B, gdn.H, gdn.K, gdn.V}, 16, -0.2, 0.2, DType::F32);
  const double scale = gated_delta_default_scale(gdn.K);
  Row r{"gdn step", "B" + std::to_string(B) + " H" + std::to_string(gdn.H)};
  r.us = time_us(reps, [&] { gated_delta_step(q, k, v, g, beta, scale, state); });
  const double bytes = 2.0 * B * gdn.H * gdn.K * gdn.V * 4 +
                       B * gdn.H * (2 * gdn.K + 2 * gdn.V) * 2.0 + B * gdn.H * 8.0;
  r.gbs = bytes / r.us / 1e3;
  print_row(r);
  rows.push_back(r);
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  bench::write_csv("bench-gdn", path, "what,shape,median_us,tflops,gb_per_s,attn_us,vs_attn",
                   [&](FILE* f) {
                     for (const Row& r : rows)
                       std::fprintf(f, "\"%s\",\"%s\",%.3f,%.3f,%.1f,%.3f,%s\n", r.what.c_str(),
                                    r.shape.c_str(), r.us, r.tflops, r.gbs, r.attn_us,
                                    ratio_str(r).c_str());
                   });
}

int run(const bench::Args& args) {
  const std::string& csv = args.csv;
  const std::string& only = args.only;
  const int reps = args.reps;
  cudaDeviceProp prop{};
  AMOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "bench-gdn on %s (%d SMs), median of %d calls; GDN H%lld K%lld V%lld chunk 64 bf16, "
      "attention H32 D64 causal bf16\n",
      prop.name, prop.multiProcessorCount, reps, (long long)gdn.H, (long long)gdn.K,
      (long long)gdn.V);
  std::printf("%-16s %-22s %11s %9s %9s %11s %8s\n", "what", "shape", "us", "TFLOP/s", "GB/s",
              "attn us", "vs attn");
  std::vector<Row> rows;
  if (only.empty() || only == "scan") {
    for (int64_t T : {2048, 4096, 8192, 16384}) {
      bench_scan(T, reps, rows);
      allocator(Device::CUDA).release_cached();
    }
  }
  if (only.empty() || only == "step") {
    for (int64_t B : {1, 16}) bench_step(B, reps, rows);
  }
  write_csv(csv, rows);
  std::printf("wrote %s\n", csv.c_str());
  return 0;
}

}  // namespace
}  // namespace amor

// --heads, --dk, --dv are taken out here; the rest goes to bench::run_command.
int main(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    int64_t* dim = a == "--heads" ? &amor::gdn.H
                   : a == "--dk"  ? &amor::gdn.K
                   : a == "--dv"  ? &amor::gdn.V
                                  : nullptr;
    if (dim && i + 1 < argc) {
      *dim = std::max<int64_t>(1, std::atoll(argv[++i]));
    } else {
      rest.push_back(argv[i]);
    }
  }
  return amor::bench::run_command(int(rest.size()), rest.data(), "bench-gdn", true, 20, amor::run);
}
