// --dry-run's GPU-hour estimate: the measured points, the interpolation between them, the ends.
#include "runner/app/gpu_hours.h"

#include <gtest/gtest.h>

#include <cmath>

namespace amor {
namespace {

TEST(GpuHours, MeasuredPointsAndInterpolation) {
  EXPECT_DOUBLE_EQ(*h200_tokens_per_s("transformer", 180'000'000), 203456);
  EXPECT_DOUBLE_EQ(*h200_tokens_per_s("transformer", 1'496'000'000), 43939);
  // Log-log halfway (the geometric mean of the sizes) is the geometric mean of the rates.
  const double mid = std::sqrt(180e6 * 1496e6);
  EXPECT_NEAR(*h200_tokens_per_s("transformer", static_cast<int64_t>(mid)), std::sqrt(203456.0 * 43939.0), 1.0);
  double last = 1e18;
  for (int64_t n = 1'000'000; n <= 3'000'000'000; n += n < 100'000'000 ? 1'000'000 : 100'000'000) {  // never faster for a bigger model
    const double t = *h200_tokens_per_s("gdn", n);
    EXPECT_LE(t, last) << n;
    last = t;
  }
}

TEST(GpuHours, Ends) {
  EXPECT_DOUBLE_EQ(*h200_tokens_per_s("mamba2", 1'000'000), 550616);  // small: the smallest's rate
  EXPECT_DOUBLE_EQ(*h200_tokens_per_s("serial", 1'000'000), 79574);   // (serial: 180M is its smallest)
  EXPECT_DOUBLE_EQ(*h200_tokens_per_s("mamba2", 2 * 1'497'000'000LL), 32289.0 / 2);  // big: 1/N
  EXPECT_FALSE(h200_tokens_per_s("no-such-kind", 180'000'000).has_value());
  for (const char* k : {"transformer", "mamba2", "gdn", "amor", "serial", "fused", "oryx"})
    EXPECT_TRUE(h200_tokens_per_s(k, 500'000'000).has_value()) << k;
}

TEST(GpuHours, TrainingTokensAndHours) {
  config::RunConfig cfg;
  cfg.model.kind = "transformer";
  cfg.train.steps = 1000;
  cfg.train.micro_batch = 4;
  cfg.train.grad_accum = 2;
  cfg.data.seq_len = 2048;
  cfg.parallel.ranks_per_run = 8;
  EXPECT_DOUBLE_EQ(training_tokens(cfg), 1000.0 * 4 * 2 * 2048 * 8);
  EXPECT_DOUBLE_EQ(*estimate_gpu_hours(cfg, 180'000'000), 1000.0 * 4 * 2 * 2048 * 8 / 203456 / 3600);
  cfg.model.kind = "no-such-kind";
  EXPECT_FALSE(estimate_gpu_hours(cfg, 180'000'000).has_value());
}

}  // namespace
}  // namespace amor
