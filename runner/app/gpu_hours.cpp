#include "runner/app/gpu_hours.h"

#include <cmath>
#include <vector>

namespace amor {

namespace {

struct Measured {
  double params;          // the preset's parameter count
  double tokens_per_s;    // one H200, tests/cuda/bench_train.py (seq 2048, micro-batch 4, bf16)
};

struct KindThroughput {
  const char* kind;
  std::vector<Measured> points;  // increasing params
};

// tests/cuda/RESULTS.md, "2026-11-29 (third session)": its training table (calls 1-2), with the
// later measurements of the same session where there are any: transformer-1.5b on cuDNN attention
// and amor-180m (call 3), mamba2-1.5b and gdn-1.5b with the faster scans (call 4). fused has no
// 180M preset: its 440M point stands in. amor-1.5b predates call 4's faster GDN scans (slow side).
//
// The 3-4M points: experiments/amor-mini.yaml's MQAR runs (2026-12-02, session 4, call 3: seq 256,
// micro-batch 128, bf16, d 256, 2 layers), the median of each kind's runs' /train/tokens_per_s,
// measured while six runs shared the one H200: a lower bound of a run alone (the dry run's
// 180M-rate estimate had been 4.4 GPU-hours for a sweep whose 13 runs took 7.2 minutes).
const std::vector<KindThroughput> kH200Throughput = {
    {"transformer", {{3.41e6, 697478}, {180e6, 203456}, {1496e6, 43939}}},
    {"mamba2", {{3.82e6, 550616}, {181e6, 139558}, {1497e6, 32289}}},
    {"gdn", {{3.68e6, 616394}, {180e6, 70965}, {1502e6, 27234}}},
    {"amor", {{4.0e6, 425929}, {182e6, 59378}, {1524e6, 15528}}},
    {"serial", {{180e6, 79574}, {1496e6, 18676}}},
    {"fused", {{438e6, 51695}, {1503e6, 24812}}},
    {"oryx", {{180e6, 70129}, {1503e6, 17313}}},
};

}  // namespace

std::optional<double> h200_tokens_per_s(const std::string& kind, int64_t params) {
  const double n = static_cast<double>(params);
  for (const auto& k : kH200Throughput) {
    if (kind != k.kind) continue;
    const auto& p = k.points;
    if (n <= p.front().params) return p.front().tokens_per_s;
    if (n >= p.back().params) return p.back().tokens_per_s * p.back().params / n;
    for (size_t i = 1; i < p.size(); ++i)
      if (n <= p[i].params) {
        if (n == p[i].params) return p[i].tokens_per_s;  // a measured size: its own rate, exactly
        const double t = std::log(n / p[i - 1].params) / std::log(p[i].params / p[i - 1].params);
        return std::exp(std::log(p[i - 1].tokens_per_s) + t * std::log(p[i].tokens_per_s / p[i - 1].tokens_per_s));
      }
  }
  return std::nullopt;
}

double training_tokens(const config::RunConfig& cfg) {
  return static_cast<double>(cfg.train.steps) * static_cast<double>(cfg.train.micro_batch) *
         static_cast<double>(cfg.train.grad_accum) * static_cast<double>(cfg.data.seq_len) *
         static_cast<double>(cfg.parallel.ranks_per_run);
}

std::optional<double> estimate_gpu_hours(const config::RunConfig& cfg, int64_t params) {
  const auto tps = h200_tokens_per_s(cfg.model.kind, params);
  if (!tps) return std::nullopt;
  return training_tokens(cfg) / *tps / 3600.0;
}

}  // namespace amor
