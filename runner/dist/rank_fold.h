// Reduction of per-rank values in rank order: how both communicators turn an all-gather of host
// scalars into an all-reduce whose result is bitwise the same on every rank and in every rerun,
// whatever reduction algorithm the transport would have picked.
#pragma once
#include <algorithm>
#include <cstdint>

#include "runner/dist/communicator.h"

namespace amor::dist {

// gathered holds W blocks of n values (rank r's at [r*n, (r+1)*n)); out[i] = op over r, r = 0..W-1.
template <class T>
void fold_in_rank_order(const T* gathered, T* out, int64_t n, int world, ReduceOp op) {
  for (int64_t i = 0; i < n; ++i) {
    T acc = gathered[i];
    for (int r = 1; r < world; ++r) {
      const T x = gathered[static_cast<int64_t>(r) * n + i];
      acc = op == ReduceOp::Sum ? acc + x : std::max(acc, x);
    }
    out[i] = acc;
  }
}

}  // namespace amor::dist
