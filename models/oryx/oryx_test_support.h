// Shared by the Oryx tests: tiny configs and modes written as strings.
#pragma once
#include <string>
#include <vector>

#include "kernels/core/tensor.h"
#include "models/core/config.h"

namespace amor::model::testing_oryx {

// d = 16, head_dim 4 (H = 4), chunk 4 for both scans so T = 9 ends in a partial chunk.
inline ModelConfig tiny_oryx(const std::string& linear) {
  ModelConfig c;
  c.kind = "oryx";
  c.d_model = 16;
  c.head_dim = 4;
  c.init_std = 0.3;
  c.oryx.linear = linear;
  c.oryx.chunk = 3;
  c.gdn.chunk = 4;
  c.mamba2.chunk = 4;
  return c;
}

// One string of '0'/'1' per sequence, e.g. {"111000111", "000111000"} -> u8 [2,9].
inline Tensor modes_of(const std::vector<std::string>& rows) {
  int64_t B = static_cast<int64_t>(rows.size()), T = static_cast<int64_t>(rows[0].size());
  Tensor m = Tensor::zeros({B, T}, DType::U8);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) m.data<uint8_t>()[b * T + t] = rows[b][t] == '1' ? 1 : 0;
  return m;
}

}  // namespace amor::model::testing_oryx
