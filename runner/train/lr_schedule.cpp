#include "runner/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace amor {

double lr_at(int64_t step, int64_t total, int64_t warmup, double peak, double min_ratio) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  double span = static_cast<double>(std::max<int64_t>(1, total - 1 - warmup));
  double p = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
}

}  // namespace amor
