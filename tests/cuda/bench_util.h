// What every benchmark command in tests/cuda shares: CUDA-event timing (the median of reps calls
// after warm-up), random inputs made on the host, and CSV files written atomically.
// Header-only: each bench_<name>_main.cpp is its own executable.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "kernels/core/backend.h"
#include "kernels/core/cuda_check.h"
#include "kernels/core/error.h"
#include "kernels/core/tensor.h"

namespace amor::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median microseconds of run(i) over reps calls (i = call index, for inputs rotated over several
// sets), each between two CUDA events, after `warmup` calls.
inline double time_us(int reps, const std::function<void(int)>& run, int warmup = 2) {
  cudaEvent_t a, b;
  AMOR_CUDA_CHECK(cudaEventCreate(&a));
  AMOR_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) run(i);
  AMOR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    AMOR_CUDA_CHECK(cudaEventRecord(a));
    run(i);
    AMOR_CUDA_CHECK(cudaEventRecord(b));
    AMOR_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    AMOR_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  AMOR_CUDA_CHECK(cudaEventDestroy(a));
  AMOR_CUDA_CHECK(cudaEventDestroy(b));
  return median(t);
}

inline double time_us(int reps, const std::function<void()>& run, int warmup = 2) {
  return time_us(reps, [&](int) { run(); }, warmup);
}

// A cuda tensor of dtype d with values uniform in [lo, hi), drawn on the host (xorshift64*).
inline Tensor random_uniform(const Shape& shape, DType d, uint64_t seed, float lo, float hi) {
  Tensor host = Tensor::empty(shape, DType::F32);
  float* p = host.data<float>();
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < host.numel(); ++i) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    p[i] = lo + (hi - lo) * (float((s * 0x2545f4914f6cdd1dull) >> 40) * 0x1p-24f);
  }
  return host.to(d).to(Device::CUDA);
}

// Writes a CSV (header line, then whatever rows() prints) to path + ".tmp" and renames it into
// place, so a killed benchmark never leaves a half-written table. `tool` names the command in
// errors.
inline void write_csv(const char* tool, const std::string& path, const std::string& header,
                      const std::function<void(FILE*)>& rows) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  AMOR_CHECK(f, "{}: cannot write {}: {}", tool, tmp, std::strerror(errno));
  std::fprintf(f, "%s\n", header.c_str());
  rows(f);
  const bool ok = std::fclose(f) == 0;
  AMOR_CHECK(ok && std::rename(tmp.c_str(), path.c_str()) == 0, "{}: cannot write {}", tool, path);
}

}  // namespace amor::bench

namespace amor::bench {

// The command line every benchmark takes: OUT.csv [--reps N] [--only SUBSTRING].
struct Args {
  std::string csv;   // where the table goes (CSV)
  std::string only;  // run only the cases whose name contains this ("" = all)
  int reps = 20;     // timed calls per case
};

// The whole of a benchmark's main(): parses the arguments (a bad command line prints the usage and
// returns 2; `takes_only` false refuses --only), refuses to run without a GPU (1), and runs
// body(args), turning an amor::Error or other exception into "tool: message" and status 1.
inline int run_command(int argc, char** argv, const char* tool, bool takes_only, int default_reps,
                       const std::function<int(const Args&)>& body) {
  Args args;
  args.reps = default_reps;
  const std::string usage = std::string("usage: ") + tool + " OUT.csv [--reps N]" +
                            (takes_only ? " [--only SUBSTRING]" : "");
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      args.reps = std::max(1, std::atoi(argv[++i]));
    } else if (takes_only && a == "--only" && i + 1 < argc) {
      args.only = argv[++i];
    } else if (!a.empty() && a[0] != '-' && args.csv.empty()) {
      args.csv = a;
    } else {
      std::fprintf(stderr, "%s\n", usage.c_str());
      return 2;
    }
  }
  if (args.csv.empty()) {
    std::fprintf(stderr, "%s\n", usage.c_str());
    return 2;
  }
  if (!cuda_available()) {
    std::fprintf(stderr, "%s: no CUDA GPU on this machine\n", tool);
    return 1;
  }
  try {
    return body(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace amor::bench
