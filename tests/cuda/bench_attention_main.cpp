// bench-attention: times our causal attention's CUDA kernels (bf16 tensor cores): forward,
// backward and forward + backward, dense and with AMOR's gate (~22% of the rows firing); and, for
// the dense cases, cuDNN's fused flash attention (kernels/attention/attention_cudnn.h) on the same
// inputs, as rows whose case ends in " cudnn" (skipped, with cuDNN's reason, where it has no plan).
// Each row forces its implementation with AMOR_ATTENTION (ours / cudnn).
//
//   bench-attention OUT.csv [--reps N] [--only SUBSTRING]
//
// Shapes: B*T = 16K tokens, T in {2K, 4K, 8K, 16K}, H = 32 heads of D = 64 (d 2048); D = 128
// (H = 16) at T = 4K; the gated path at every T with D = 64. q, k, v, dout [B,T,H,D] bf16 with
// N(0,1)-like values (uniform +-sqrt(3)); the backward gets the forward's o and lse. Each time is
// the median of N calls (default 20) between CUDA events after two warm-up calls.
//
// FLOP counts (2 per multiply-add; what causal attention needs, the masked half not counted):
//   forward  2 * 2 * B * H * T * T * D / 2   (S = Q K^T and O = P V over the causal half)
//   backward 2.5 x the forward                (dV = P^T dO, dP = dO V^T, S again, dQ, dK)
//   gated    the same times the firing fraction (the row work the kernels have to do).
//
// Decode rows (case "decode B.. Tk.. H32 D64 auto|tiles"): one query row per sequence (Tq = 1)
// over a KV cache of Tk keys, B in {1, 8}, Tk 4K .. 128K, H = Hkv = 32, D = 64, the forward only,
// under AMOR_ATTENTION_DECODE=auto (the split-KV kernel from Tk = 1024) and =tiles (the tile
// forward); GB/s counts the K and V bytes (B Tk Hkv D 2 x 2), the traffic that bounds decode.
// Calls rotate over enough K/V sets (up to 8) to span >= 256 MB, so the cache is not read from
// L2 (50 MB). Written to OUT_decode.csv (OUT without .csv, then _decode.csv).
// tests/cuda/bench_attention.sh runs this and PyTorch's SDPA (bench_attention_sdpa.py) on the
// same shapes and prints the ratio. Prints a table and writes it as CSV (temp + rename).
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/core/backend.h"
#include "kernels/core/cuda_check.h"
#include "kernels/core/error.h"
#include "tests/cuda/bench_util.h"

namespace amor {
namespace {

constexpr int64_t kTokens = 16384;

using bench::time_us;

uint64_t next(uint64_t& s) {  // xorshift64*: the gate's coin flips
  s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
  return s * 0x2545f4914f6cdd1dull;
}

// A bf16 cuda tensor, uniform in +-sqrt(3) (unit variance).
Tensor dev_input(const Shape& shape, uint64_t seed) {
  return bench::random_uniform(shape, DType::BF16, seed, -1.7320508f, 1.7320508f);
}

struct Case {
  int64_t T, H, D;
  bool gated;
  bool cudnn = false;  // cuDNN's fused attention instead of our kernels (dense only)
};

struct Row {
  Case c;
  int64_t B = 0;
  double firing = 1.0;  // fraction of firing rows
  double fwd_us = 0, bwd_us = 0, both_us = 0;
  double fwd_flops = 0;
};

double tflops(double flops, double us) { return flops / (us * 1e-6) / 1e12; }

std::string label(const Case& c) {
  return std::string(c.gated ? "gated22" : "dense") + " T" + std::to_string(c.T) + " H" +
         std::to_string(c.H) + " D" + std::to_string(c.D) + (c.cudnn ? " cudnn" : "");
}

// Whether cuDNN builds both plans for the case (printing its reason where not).
bool cudnn_takes(const Case& c) {
  const cuda::CudnnAttnShape n{kTokens / c.T, c.T, c.T, c.H, c.H, c.D};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  for (bool backward : {false, true})
    if (!cuda::cudnn_attention_supported(n, scale, backward)) {
      std::printf("%-28s skipped: %s\n", label(c).c_str(),
                  cuda::cudnn_attention_unsupported_reason(n, scale, backward).c_str());
      return false;
    }
  return true;
}

Row run_case(const Case& c, int reps) {
  setenv("AMOR_ATTENTION", c.cudnn ? "cudnn" : "ours", 1);
  Row r{c};
  r.B = kTokens / c.T;
  const Shape qs{r.B, c.T, c.H, c.D};
  Tensor q = dev_input(qs, 1), k = dev_input(qs, 2), v = dev_input(qs, 3), dout = dev_input(qs, 4);
  Tensor gate;
  if (c.gated) {
    Tensor g = Tensor::empty({r.B, c.T}, DType::U8);
    uint64_t s = 12345;
    int64_t fired = 0;
    for (int64_t i = 0; i < g.numel(); ++i) {
      g.data<uint8_t>()[i] = double(next(s) >> 11) * 0x1p-53 < 0.22 ? 1 : 0;
      fired += g.data<uint8_t>()[i];
    }
    r.firing = double(fired) / double(g.numel());
    gate = g.to(Device::CUDA);
  }
  r.fwd_flops = 2.0 * 2.0 * double(r.B) * c.H * double(c.T) * double(c.T) * c.D / 2.0 * r.firing;
  const AttentionOutput out = attention_forward(q, k, v, gate);
  r.fwd_us = time_us(reps, [&] { attention_forward(q, k, v, gate); });
  r.bwd_us = time_us(reps, [&] { attention_backward(q, k, v, gate, out.o, out.lse, dout); });
  r.both_us = time_us(reps, [&] {
    const AttentionOutput o = attention_forward(q, k, v, gate);
    attention_backward(q, k, v, gate, o.o, o.lse, dout);
  });
  return r;
}

void print_header() {
  std::printf("%-28s %4s %10s %10s %12s %9s %9s %9s\n", "case", "B", "fwd us", "bwd us",
              "fwd+bwd us", "fwd TF/s", "bwd TF/s", "f+b TF/s");
}

void print_row(const Row& r) {
  const double f = r.fwd_flops, b = 2.5 * r.fwd_flops;
  std::printf("%-28s %4lld %10.1f %10.1f %12.1f %9.1f %9.1f %9.1f\n", label(r.c).c_str(),
              static_cast<long long>(r.B), r.fwd_us, r.bwd_us, r.both_us, tflops(f, r.fwd_us),
              tflops(b, r.bwd_us), tflops(f + b, r.both_us));
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  bench::write_csv("bench-attention", path,
                   "case,gated,B,T,H,D,firing,fwd_us,bwd_us,fwdbwd_us,fwd_tflops,bwd_tflops,"
                   "fwdbwd_tflops",
                   [&](FILE* f) {
                     for (const Row& r : rows) {
                       const double fl = r.fwd_flops;
                       std::fprintf(f, "%s,%d,%lld,%lld,%lld,%lld,%.4f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n",
                                    label(r.c).c_str(), r.c.gated ? 1 : 0, static_cast<long long>(r.B),
                                    static_cast<long long>(r.c.T), static_cast<long long>(r.c.H),
                                    static_cast<long long>(r.c.D), r.firing, r.fwd_us, r.bwd_us,
                                    r.both_us, tflops(fl, r.fwd_us), tflops(2.5 * fl, r.bwd_us),
                                    tflops(3.5 * fl, r.both_us));
                     }
                   });
}

// ---- decode rows (see the top)
struct DecodeRow {
  int64_t B, Tk;
  bool tiles;  // AMOR_ATTENTION_DECODE=tiles, else auto
  double us = 0, gbps = 0;
};

std::string decode_label(const DecodeRow& r) {
  return "decode B" + std::to_string(r.B) + " Tk" + std::to_string(r.Tk) + " H32 D64" +
         (r.tiles ? " tiles" : " auto");
}

// A bf16 [B,Tk,H,D] cuda tensor filled with copies of one random block of 4096 keys (drawing
// B Tk H D values on the host would take seconds at 128K keys; the values do not change the time).
Tensor kv_cache(int64_t B, int64_t Tk, int64_t H, int64_t D, uint64_t seed) {
  const int64_t blk = std::min<int64_t>(Tk, 4096);
  const Tensor src = dev_input({1, blk, H, D}, seed);
  Tensor t = Tensor::empty({B, Tk, H, D}, DType::BF16, Device::CUDA);
  const size_t row = size_t(H * D) * sizeof(uint16_t);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < Tk; j += blk) {
      const int64_t n = std::min(blk, Tk - j);
      AMOR_CUDA_CHECK(cudaMemcpy(static_cast<char*>(t.raw_data()) + size_t(b * Tk + j) * row,
                                 src.raw_data(), size_t(n) * row, cudaMemcpyDeviceToDevice));
    }
  return t;
}

DecodeRow run_decode(DecodeRow r, int reps) {
  setenv("AMOR_ATTENTION", "ours", 1);
  setenv("AMOR_ATTENTION_DECODE", r.tiles ? "tiles" : "auto", 1);
  constexpr int64_t H = 32, D = 64;
  const double kv_bytes = 2.0 * double(r.B) * double(r.Tk) * H * D * 2.0;
  const int sets = int(std::clamp<double>(std::ceil(256e6 / kv_bytes), 1.0, 8.0));
  std::vector<Tensor> q, k, v;
  for (int i = 0; i < sets; ++i) {
    q.push_back(dev_input({r.B, 1, H, D}, 10 + i));
    k.push_back(kv_cache(r.B, r.Tk, H, D, 20 + i));
    v.push_back(kv_cache(r.B, r.Tk, H, D, 30 + i));
  }
  r.us = time_us(reps, [&](int i) { attention_forward(q[i % sets], k[i % sets], v[i % sets]); });
  r.gbps = kv_bytes / (r.us * 1e-6) / 1e9;
  unsetenv("AMOR_ATTENTION_DECODE");
  return r;
}

void run_decode_rows(const std::string& csv, const std::string& only, int reps) {
  std::vector<DecodeRow> rows;
  bool header = false;
  for (int64_t B : {1, 8})
    for (int64_t Tk : {4096, 8192, 16384, 32768, 65536, 131072})
      for (bool tiles : {false, true}) {
        DecodeRow r{B, Tk, tiles};
        if (!only.empty() && decode_label(r).find(only) == std::string::npos) continue;
        if (!header) {
          std::printf("%-34s %10s %9s\n", "case", "fwd us", "K+V GB/s");
          header = true;
        }
        rows.push_back(run_decode(r, reps));
        std::printf("%-34s %10.1f %9.0f\n", decode_label(rows.back()).c_str(), rows.back().us,
                    rows.back().gbps);
        std::fflush(stdout);
      }
  if (rows.empty()) return;
  const std::string stem = csv.size() > 4 && csv.compare(csv.size() - 4, 4, ".csv") == 0
                               ? csv.substr(0, csv.size() - 4)
                               : csv;
  const std::string path = stem + "_decode.csv";
  bench::write_csv("bench-attention", path, "case,B,Tk,H,D,mode,fwd_us,kv_gbps", [&](FILE* f) {
    for (const DecodeRow& r : rows)
      std::fprintf(f, "%s,%lld,%lld,32,64,%s,%.2f,%.1f\n", decode_label(r).c_str(),
                   static_cast<long long>(r.B), static_cast<long long>(r.Tk),
                   r.tiles ? "tiles" : "auto", r.us, r.gbps);
  });
  std::printf("wrote %s\n", path.c_str());
}

int run(const bench::Args& args) {
  const std::string& csv = args.csv;
  const std::string& only = args.only;
  const int reps = args.reps;
  std::vector<Case> cases;
  for (int64_t T : {2048, 4096, 8192, 16384})
    for (bool cudnn : {false, true}) cases.push_back({T, 32, 64, false, cudnn});
  for (bool cudnn : {false, true}) cases.push_back({4096, 16, 128, false, cudnn});
  for (int64_t T : {2048, 4096, 8192, 16384}) cases.push_back({T, 32, 64, true});
  print_header();
  std::vector<Row> rows;
  for (const Case& c : cases) {
    if (!only.empty() && label(c).find(only) == std::string::npos) continue;
    if (c.cudnn && !cudnn_takes(c)) continue;
    rows.push_back(run_case(c, reps));
    print_row(rows.back());
  }
  write_csv(csv, rows);
  std::printf("wrote %s\n", csv.c_str());
  run_decode_rows(csv, only, reps);
  return 0;
}

}  // namespace
}  // namespace amor

int main(int argc, char** argv) {
  return amor::bench::run_command(argc, argv, "bench-attention", true, 20, amor::run);
}
