// bench-ssd: times the Mamba2 SSD scan (forward, backward, both) on the GPU against our causal
// attention at the same batch and sequence length, measured in the same run, and the SSD decode
// step.
//
//   bench-ssd OUT.csv [--reps N] [--kernels] [--heads H]
//
// Shapes: B * T = 16384 tokens, T in {2K, 4K, 8K, 16K}; SSD with H = 64 heads (--heads H: e.g. 24,
// a 180M layer's count), P = 64, N = 128,
// G = 1, chunk 64 (a 1.5B Mamba2 layer: d_inner 4096); attention with 32 heads of 64 (d = 2048,
// a 1.5B attention layer), causal, no gate. x, B, C, dy, q, k, v, dout in bf16; dt, A, D f32.
// Each time is the median of N calls (default 20) between two CUDA events, after two warm-up
// calls; every input is far larger than the L2 (x alone is 128 MiB), so no rotation is needed.
//
// FLOPs (multiply-add = 2), per token and head, of the chunked algorithm as the kernels compute
// it (the Q x Q products counted in full, as mamba_ssm's count does):
//   SSD forward   4 P N + 2 Q (N + P)     chunk state P N, C S^T N P, C B^T Q N, M x Q P
//   SSD backward 12 P N + 6 Q (N + P)     the rerun chunk state, dS, G B, S^T dy, G^T x, x B
//                                         terms (6 x P N) and the Q x Q products (3 x each)
//   attention forward 2 T D (causal half of 4 T D), backward 2.5 x the forward
// As in training (Mamba2Mixer), the forward keeps its intermediates (ssd_forward's
// keep_for_backward) and the backward reads them: "ssd backward" and "ssd fwd+bwd" time that,
// "ssd fwd+bwd recompute" the pair that keeps nothing (the backward reruns the forward's state
// passes), with the ratio on the line after; AMOR_SSD_RECOMPUTE=1 makes the recomputing pair the
// main rows too. "ssd forward" alone keeps nothing (inference).
// "vs attn" = attention's time / the SSD's time at the same B, T (> 1: the SSD is faster);
// "n/a" where attention's CUDA path is not there (its error is printed once).
// At T = 4K the f32 path (SIMT kernels) is timed too, as the reference of the bf16 path's tensor
// cores ("bf16 vs f32" line).
// At T = 4K the bf16 per-chunk tensor-core path (the earlier kernels, kept behind
// ssd_set_spans(false)) is timed too, against the default path by spans of chunks.
// --kernels: instead of the table, each kernel of the forward and the backward timed alone
// (CUDA events between the launches, through ssd_set_kernel_hook; median of N calls) at
// T = 2K and 16K, for the span path (as chosen; recomputing instead of keeping: "spans-rc";
// with 2 stages of copies in flight: ssd_set_span_stages; with 4 and 16 chunks per span:
// ssd_set_span_len) and the per-chunk path; printed, and written to OUT.csv. Each variant keeps
// the forward's intermediates for the backward as the table does, except spans-rc.
// Decode step: B in {1, 16}, H = 64, P = 64, N = 128; GB/s counts the f32 state read and written
// (8 P N bytes per (b, h)), the only traffic that matters.
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/cast/cast.h"
#include "kernels/core/backend.h"
#include "kernels/core/caching_allocator.h"
#include "kernels/core/cuda_check.h"
#include "kernels/ssd/ssd.h"
#include "kernels/ssd/ssd_cuda.h"
#include "tests/cuda/bench_util.h"

namespace amor {
namespace {

constexpr int64_t kTokens = 16384, kP = 64, kN = 128, kChunk = 64;
int64_t g_heads = 64;  // --heads H
constexpr int64_t kAttnHeads = 32, kAttnDim = 64;

using bench::time_us;

// A cuda tensor of `shape` with values uniform in [lo, hi).
Tensor random_tensor(const Shape& shape, DType d, uint64_t seed, float lo, float hi) {
  return bench::random_uniform(shape, d, seed, lo, hi);
}

struct Row {
  std::string op, shape;
  double us, tflops, attn_us;  // attn_us < 0: not measured (n/a)
  double gbs;                  // decode rows only
};

void print_row(const Row& r) {
  char ratio[32] = "n/a", attn[32] = "n/a";
  if (r.attn_us > 0) {
    std::snprintf(ratio, sizeof(ratio), "%.2f", r.attn_us / r.us);
    std::snprintf(attn, sizeof(attn), "%.1f", r.attn_us);
  }
  if (r.gbs > 0) {
    std::printf("%-22s %-24s %11.1f %8s %9.0f GB/s\n", r.op.c_str(), r.shape.c_str(), r.us, "",
                r.gbs);
  } else {
    std::printf("%-22s %-24s %11.1f %8.1f %11s %8s\n", r.op.c_str(), r.shape.c_str(), r.us,
                r.tflops, attn, ratio);
  }
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  bench::write_csv("bench-ssd", path, "op,shape,median_us,tflops,gb_per_s,attention_us,vs_attention",
                   [&](FILE* f) {
                     for (const Row& r : rows) {
                       std::fprintf(f, "\"%s\",\"%s\",%.3f,%.3f,%.1f,", r.op.c_str(), r.shape.c_str(),
                                    r.us, r.tflops, r.gbs);
                       if (r.attn_us > 0) {
                         std::fprintf(f, "%.3f,%.3f\n", r.attn_us, r.attn_us / r.us);
                       } else {
                         std::fprintf(f, "n/a,n/a\n");
                       }
                     }
                   });
}

// ---- --kernels: per-kernel times through the SSD launchers' hook.
bool g_kernels_mode = false;
std::vector<std::pair<std::string, cudaEvent_t>> g_marks;

void record_mark(const char* kernel, cudaStream_t s) {
  cudaEvent_t e;
  AMOR_CUDA_CHECK(cudaEventCreate(&e));
  AMOR_CUDA_CHECK(cudaEventRecord(e, s));
  g_marks.emplace_back(kernel, e);
}

// Median time of each kernel `f` launches, over `reps` calls (after one warm-up call), in the
// order of their first launch.
std::vector<std::pair<std::string, double>> kernel_times(int reps, const std::function<void()>& f) {
  f();
  AMOR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::string> order;
  std::vector<std::vector<double>> times;
  cuda::ssd_set_kernel_hook(record_mark);
  for (int r = 0; r < reps; ++r) {
    g_marks.clear();
    f();
    AMOR_CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 1; i < g_marks.size(); ++i) {
      if (g_marks[i].first == "start") continue;
      float ms = 0.0f;
      AMOR_CUDA_CHECK(cudaEventElapsedTime(&ms, g_marks[i - 1].second, g_marks[i].second));
      size_t at = std::find(order.begin(), order.end(), g_marks[i].first) - order.begin();
      if (at == order.size()) {
        order.push_back(g_marks[i].first);
        times.emplace_back();
      }
      times[at].push_back(1e3 * ms);
    }
    for (auto& m : g_marks) AMOR_CUDA_CHECK(cudaEventDestroy(m.second));
  }
  cuda::ssd_set_kernel_hook(nullptr);
  g_marks.clear();
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < order.size(); ++i) {
    std::vector<double>& t = times[i];
    std::sort(t.begin(), t.end());
    out.emplace_back(order[i], t[t.size() / 2]);
  }
  return out;
}

int run_kernels(const bench::Args& args) {
  const DType bf = DType::BF16;
  Tensor x_all = random_tensor({kTokens * g_heads * kP}, bf, 1, -1.0f, 1.0f);
  Tensor dy_all = random_tensor({kTokens * g_heads * kP}, bf, 2, -1.0f, 1.0f);
  Tensor B_all = random_tensor({kTokens * kN}, bf, 3, -0.5f, 0.5f);
  Tensor C_all = random_tensor({kTokens * kN}, bf, 4, -0.5f, 0.5f);
  Tensor dt_all = random_tensor({kTokens * g_heads}, DType::F32, 5, 1e-3f, 0.1f);
  Tensor A = random_tensor({g_heads}, DType::F32, 6, -16.0f, -1.0f);
  Tensor D = random_tensor({g_heads}, DType::F32, 7, -1.0f, 1.0f);
  std::printf("bench-ssd --kernels: median of %d calls, SSD H=%ld P=%ld N=%ld chunk %ld, bf16\n",
              args.reps, long(g_heads), long(kP), long(kN), long(kChunk));
  std::printf("%-8s %-14s %-46s %10s\n", "path", "shape [B,T]", "kernel", "us");
  FILE* f = std::fopen(args.csv.c_str(), "w");
  if (!f) throw std::runtime_error("bench-ssd: cannot write " + args.csv);
  std::fprintf(f, "path,shape,kernel,median_us\n");
  // The span path as the launchers choose (span length, stages of copies in flight), then with
  // two stages (one chunk's copies ahead), then spans of 4 and 16 chunks; then the per-chunk
  // path.
  struct Variant {
    const char* path;
    bool spans;
    int span_len, stages;
    bool keep;  // the forward keeps its intermediates for the backward
  };
  const bool keep = ssd_keep_for_backward_default();
  for (const Variant& v :
       {Variant{"spans", true, 0, 0, keep}, Variant{"spans-rc", true, 0, 0, false},
        Variant{"spans-s2", true, 0, 2, keep}, Variant{"spans4", true, 4, 0, keep},
        Variant{"spans16", true, 16, 0, keep}, Variant{"chunks", false, 0, 0, keep}}) {
    cuda::ssd_set_spans(v.spans);
    cuda::ssd_set_span_len(v.span_len);
    cuda::ssd_set_span_stages(v.stages);
    for (int64_t T : {2048, 16384}) {
      const int64_t B = kTokens / T;
      const std::string shape = "[" + std::to_string(B) + "," + std::to_string(T) + "]";
      Tensor x = x_all.view({B, T, g_heads, kP}), dy = dy_all.view({B, T, g_heads, kP});
      Tensor Bm = B_all.view({B, T, 1, kN}), Cm = C_all.view({B, T, 1, kN});
      Tensor dt = dt_all.view({B, T, g_heads});
      double total = 0.0;
      auto both = kernel_times(args.reps, [&] {
        const SsdOut o = ssd_forward(x, dt, A, Bm, Cm, D, Tensor(), kChunk, v.keep);
        ssd_backward(x, dt, A, Bm, Cm, D, Tensor(), dy, Tensor(), kChunk, o.saved);
      });
      for (auto& [name, us] : both) {
        const char* path = v.path;
        std::printf("%-8s %-14s %-46s %10.1f\n", path, shape.c_str(), name.c_str(), us);
        std::fprintf(f, "%s,\"%s\",\"%s\",%.3f\n", path, shape.c_str(), name.c_str(), us);
        total += us;
      }
      std::printf("%-8s %-14s %-46s %10.1f\n", v.path, shape.c_str(), "(sum, fwd+bwd)", total);
      allocator(Device::CUDA).release_cached();
    }
  }
  cuda::ssd_set_spans(true);
  cuda::ssd_set_span_len(0);
  cuda::ssd_set_span_stages(0);
  std::fclose(f);
  std::printf("wrote %s\n", args.csv.c_str());
  return 0;
}

int run(const bench::Args& args) {
  if (g_kernels_mode) return run_kernels(args);
  const std::string& csv = args.csv;
  const int reps = args.reps;
  cudaDeviceProp prop{};
  AMOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench-ssd on %s (%d SMs), median of %d calls; SSD H=%ld P=%ld N=%ld chunk %ld, "
              "attention %ld heads of %ld, bf16\n",
              prop.name, prop.multiProcessorCount, reps, long(g_heads), long(kP), long(kN),
              long(kChunk), long(kAttnHeads), long(kAttnDim));
  std::printf("%-22s %-24s %11s %8s %11s %8s\n", "op", "shape [B,T]", "us", "TFLOP/s", "attn us",
              "vs attn");

  // One set of inputs for every shape (all have B * T = kTokens), viewed per shape.
  const DType bf = DType::BF16;
  Tensor x_all = random_tensor({kTokens * g_heads * kP}, bf, 1, -1.0f, 1.0f);
  Tensor dy_all = random_tensor({kTokens * g_heads * kP}, bf, 2, -1.0f, 1.0f);
  Tensor B_all = random_tensor({kTokens * kN}, bf, 3, -0.5f, 0.5f);
  Tensor C_all = random_tensor({kTokens * kN}, bf, 4, -0.5f, 0.5f);
  Tensor dt_all = random_tensor({kTokens * g_heads}, DType::F32, 5, 1e-3f, 0.1f);
  Tensor A = random_tensor({g_heads}, DType::F32, 6, -16.0f, -1.0f);
  Tensor D = random_tensor({g_heads}, DType::F32, 7, -1.0f, 1.0f);
  // Attention's q, k (from qk_all) and v, dout (from vo_all), [B,T,32,64] each: pools of their
  // own, since the SSD's are too small for two of them below 64 heads (--heads 24 failed with
  // "elements [0, 33554432) are outside bf16[25165824]" until session 18).
  const int64_t attn_numel = kTokens * kAttnHeads * kAttnDim;
  Tensor qk_all = random_tensor({2 * attn_numel}, bf, 8, -1.0f, 1.0f);
  Tensor vo_all = random_tensor({2 * attn_numel}, bf, 9, -1.0f, 1.0f);

  std::vector<Row> rows;
  bool attn_failed = false;
  for (int64_t T : {2048, 4096, 8192, 16384}) {
    const int64_t B = kTokens / T;
    const std::string shape = "[" + std::to_string(B) + "," + std::to_string(T) + "]";
    Tensor x = x_all.view({B, T, g_heads, kP}), dy = dy_all.view({B, T, g_heads, kP});
    Tensor Bm = B_all.view({B, T, 1, kN}), Cm = C_all.view({B, T, 1, kN});
    Tensor dt = dt_all.view({B, T, g_heads});
    const double tok_heads = double(B) * T * g_heads;
    const double fwd_flops = tok_heads * (4.0 * kP * kN + 2.0 * kChunk * (kN + kP));
    const double bwd_flops = tok_heads * (12.0 * kP * kN + 6.0 * kChunk * (kN + kP));
    const double ssd_fwd = time_us(reps, [&] { ssd_forward(x, dt, A, Bm, Cm, D, Tensor(), kChunk); });
    // fwd+bwd as in training: the forward keeps (unless AMOR_SSD_RECOMPUTE=1), the backward
    // reads; then the recomputing pair.
    const bool keep = ssd_keep_for_backward_default();
    auto pair = [&](bool kept) {
      const SsdOut o = ssd_forward(x, dt, A, Bm, Cm, D, Tensor(), kChunk, kept);
      ssd_backward(x, dt, A, Bm, Cm, D, Tensor(), dy, Tensor(), kChunk, o.saved);
    };
    const Tensor saved = ssd_forward(x, dt, A, Bm, Cm, D, Tensor(), kChunk, keep).saved;
    const double ssd_bwd = time_us(reps, [&] {
      ssd_backward(x, dt, A, Bm, Cm, D, Tensor(), dy, Tensor(), kChunk, saved);
    });
    const double ssd_both = time_us(reps, [&] { pair(keep); });
    const double ssd_both_rc = time_us(reps, [&] { pair(false); });

    // Attention at the same B, T: q, k, v, dout [B,T,32,64] cut from its two pools.
    double at_fwd = -1, at_bwd = -1, at_both = -1;
    const double attn_fwd_flops = 2.0 * B * kAttnHeads * double(T) * T * kAttnDim;
    if (!attn_failed) {
      try {
        const Shape qs{B, T, kAttnHeads, kAttnDim};
        const int64_t n = shape_numel(qs);
        Tensor q = qk_all.slice_flat(0, qs), k = qk_all.slice_flat(n, qs);
        Tensor v = vo_all.slice_flat(0, qs), dout = vo_all.slice_flat(n, qs);
        AttentionOutput o = attention_forward(q, k, v);
        at_fwd = time_us(reps, [&] { attention_forward(q, k, v); });
        at_bwd = time_us(reps, [&] { attention_backward(q, k, v, Tensor(), o.o, o.lse, dout); });
        at_both = time_us(reps, [&] {
          AttentionOutput f = attention_forward(q, k, v);
          attention_backward(q, k, v, Tensor(), f.o, f.lse, dout);
        });
      } catch (const std::exception& e) {
        std::printf("attention on cuda failed (ratios n/a): %s\n", e.what());
        attn_failed = true;
        at_fwd = at_bwd = at_both = -1;
      }
    }
    (void)attn_fwd_flops;
    rows.push_back({"ssd forward", shape, ssd_fwd, fwd_flops / ssd_fwd / 1e6, at_fwd, 0});
    rows.push_back({"ssd backward", shape, ssd_bwd, bwd_flops / ssd_bwd / 1e6, at_bwd, 0});
    rows.push_back({"ssd fwd+bwd", shape, ssd_both, (fwd_flops + bwd_flops) / ssd_both / 1e6,
                    at_both, 0});
    rows.push_back({"ssd fwd+bwd recompute", shape, ssd_both_rc,
                    (fwd_flops + bwd_flops) / ssd_both_rc / 1e6, at_both, 0});
    if (at_fwd > 0) {
      rows.push_back({"attention forward", shape, at_fwd, attn_fwd_flops / at_fwd / 1e6, -1, 0});
      rows.push_back({"attention backward", shape, at_bwd, 2.5 * attn_fwd_flops / at_bwd / 1e6,
                      -1, 0});
      rows.push_back({"attention fwd+bwd", shape, at_both, 3.5 * attn_fwd_flops / at_both / 1e6,
                      -1, 0});
    }
    for (size_t i = rows.size() - (at_fwd > 0 ? 7 : 4); i < rows.size(); ++i) print_row(rows[i]);
    std::printf("  fwd+bwd %s vs recompute at %s: %.2fx faster\n",
                keep ? "keeping the forward's intermediates" : "(AMOR_SSD_RECOMPUTE=1: both recompute)",
                shape.c_str(), ssd_both_rc / ssd_both);
    if (T == 4096) {
      // The f32 path (SIMT kernels) on the same values: the reference for the bf16 path's
      // tensor cores, measured in the same run.
      Tensor x32 = cast(x, DType::F32), dy32 = cast(dy, DType::F32);  // on the device
      Tensor B32 = cast(Bm, DType::F32), C32 = cast(Cm, DType::F32);
      const double f32_both = time_us(std::min(reps, 5), [&] {
        const SsdOut o = ssd_forward(x32, dt, A, B32, C32, D, Tensor(), kChunk, keep);
        ssd_backward(x32, dt, A, B32, C32, D, Tensor(), dy32, Tensor(), kChunk, o.saved);
      });
      rows.push_back({"ssd fwd+bwd f32 simt", shape, f32_both,
                      (fwd_flops + bwd_flops) / f32_both / 1e6, -1, 0});
      print_row(rows.back());
      std::printf("  bf16 (tensor cores) vs f32 (SIMT) fwd+bwd at %s: %.2fx faster\n",
                  shape.c_str(), f32_both / ssd_both);
      // The bf16 per-chunk kernels (the path before the spans), on the same values.
      cuda::ssd_set_spans(false);
      const double chunks_both = time_us(reps, [&] { pair(keep); });
      cuda::ssd_set_spans(true);
      rows.push_back({"ssd fwd+bwd per-chunk", shape, chunks_both,
                      (fwd_flops + bwd_flops) / chunks_both / 1e6, -1, 0});
      print_row(rows.back());
      std::printf("  bf16 by spans vs per-chunk fwd+bwd at %s: %.2fx faster\n", shape.c_str(),
                  chunks_both / ssd_both);
    }
    allocator(Device::CUDA).release_cached();
  }

  // Decode step.
  for (int64_t B : {1, 16}) {
    Tensor x = random_tensor({B, g_heads, kP}, bf, 10, -1.0f, 1.0f);
    Tensor Bm = random_tensor({B, 1, kN}, bf, 11, -0.5f, 0.5f);
    Tensor Cm = random_tensor({B, 1, kN}, bf, 12, -0.5f, 0.5f);
    Tensor dt = random_tensor({B, g_heads}, DType::F32, 13, 1e-3f, 0.1f);
    Tensor state = random_tensor({B, g_heads, kP, kN}, DType::F32, 14, -1.0f, 1.0f);
    const double us = time_us(reps, [&] { ssd_step(x, dt, A, Bm, Cm, D, state); });
    const double bytes = 8.0 * B * g_heads * kP * kN;
    rows.push_back({"ssd_step (decode)", "[" + std::to_string(B) + ",1]", us, 0, -1,
                    bytes / us / 1e3});
    print_row(rows.back());
  }
  write_csv(csv, rows);
  std::printf("wrote %s\n", csv.c_str());
  return 0;
}

}  // namespace
}  // namespace amor

int main(int argc, char** argv) {
  // --kernels and --heads H (this tool's own flags) are taken out before the common arguments
  // are parsed.
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--kernels") == 0) {
      amor::g_kernels_mode = true;
    } else if (i > 0 && std::strcmp(argv[i], "--heads") == 0 && i + 1 < argc) {
      amor::g_heads = std::max(1L, std::atol(argv[++i]));
    } else {
      rest.push_back(argv[i]);
    }
  }
  return amor::bench::run_command(int(rest.size()), rest.data(), "bench-ssd", false, 20,
                                  amor::run);
}
