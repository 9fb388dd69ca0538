#include "runner/train/run_dtypes.h"

#include "kernels/core/error.h"

namespace amor {

RunDtypes run_dtypes(const config::RunConfig& cfg) {
  const std::string& t = cfg.train.dtype;
  const bool cuda = cfg.device == "cuda";
  RunDtypes d;
  if (t == "f64") {
    AMOR_CHECK(!cuda, "train.dtype: f64 runs on the cpu only (device: cuda computes in bf16 or f32)");
    d.master = d.compute = d.loss = DType::F64;
  } else if (t == "bf16" || (t == "auto" && cuda)) {
    AMOR_CHECK(cuda, "train.dtype: bf16 needs device: cuda (the cpu backend computes in f32 or f64)");
    d.compute = DType::BF16;
  } else if (t != "f32" && t != "auto") {
    throw Error(fmt::format("train.dtype: '{}' is not one of auto, f32, f64, bf16", t));
  }
  return d;
}

}  // namespace amor
