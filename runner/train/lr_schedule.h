// The learning-rate schedule (design §4): linear warmup to the peak, then cosine decay to
// min_ratio * peak at the last step.
//   step < warmup:  lr = peak * (step + 1) / warmup
//   otherwise:      lr = peak * (min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2),
//                   p = (step - warmup) / max(1, total - 1 - warmup)   in [0, 1]
// Steps count from 0; the first step after warmup runs at the peak and the last at the floor.
#pragma once
#include <cstdint>

namespace amor {

double lr_at(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak, double min_ratio);

}  // namespace amor
