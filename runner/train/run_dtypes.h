// The run's dtypes (design §2). cpu: masters and compute in train.dtype (f32 or f64). cuda: f32
// masters, moments and gradients; compute in bf16 (train.dtype bf16 or auto) or f32 (exactness
// checks against the cpu).
#pragma once
#include "kernels/core/dtype.h"
#include "runner/config/run_config.h"

namespace amor {

struct RunDtypes {
  DType master = DType::F32, compute = DType::F32;
  DType loss = DType::F32;  // the per-token loss and its gradient (f32 statistics on cuda)
};

RunDtypes run_dtypes(const config::RunConfig& cfg);

}  // namespace amor
