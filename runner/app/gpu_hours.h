// `--dry-run`'s GPU-hour estimate: a run's training tokens over a measured training throughput.
//
// The throughput is a table (kH200Throughput in gpu_hours.cpp): tokens/s of one H200 per model
// kind at about 180M and 1.5B parameters, measured by tests/cuda/bench_train.py (seq 2048,
// micro-batch 4, bf16; tests/cuda/RESULTS.md), and for transformer, mamba2, gdn and amor also at
// 3-4M (experiments/amor-mini.yaml's MQAR runs, six sharing the GPU: a lower bound). Between two measured sizes tokens/s is interpolated
// log-log in the parameter count; below the smallest the smallest's tokens/s is used (a small
// model does not fill the GPU); above the largest tokens/s falls as 1/parameters (FLOPs per token
// grow as 6N). It is an estimate: it ignores the run's sequence length, batch, dtype, attention
// backend, evaluation and checkpoints, and assumes every rank is one H200 at the one-GPU rate. A
// model kind without an entry gets no estimate (and the runner still runs it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "runner/config/run_config.h"

namespace amor {

// Tokens/s of one H200 training a `kind` model of `params` parameters; nullopt for a kind the
// table lacks.
std::optional<double> h200_tokens_per_s(const std::string& kind, int64_t params);

// Tokens the run trains on: steps × micro_batch × grad_accum × seq_len × ranks_per_run.
double training_tokens(const config::RunConfig& cfg);

// GPU-hours of the run's training on H200s (training_tokens / h200_tokens_per_s / 3600).
std::optional<double> estimate_gpu_hours(const config::RunConfig& cfg, int64_t params);

}  // namespace amor
