// Sizes and memory layout shared by the SSD references (ssd_recurrent_ref.h, ssd_chunked_ref.h).
//
//   x, y   [batch, seqlen, heads, headdim]     dt      [batch, seqlen, heads]
//   B, C   [batch, seqlen, groups, dstate]     A, D    [heads]
//   states [batch, heads, headdim, dstate]     (h0, final state, decode state)
//
// Head h reads the B and C of group h / (heads / groups), as mamba_ssm's ngroups does.
#pragma once
#include <cstdint>

namespace amor::ref {

struct SsdLayout {
  int64_t batch, seqlen, heads, headdim, groups, dstate;

  int64_t group_of(int64_t h) const { return h / (heads / groups); }
  // Offsets of the first element of each row.
  int64_t x_at(int64_t b, int64_t t, int64_t h) const { return ((b * seqlen + t) * heads + h) * headdim; }
  int64_t dt_at(int64_t b, int64_t t, int64_t h) const { return (b * seqlen + t) * heads + h; }
  int64_t bc_at(int64_t b, int64_t t, int64_t h) const {
    return ((b * seqlen + t) * groups + group_of(h)) * dstate;
  }
  int64_t state_at(int64_t b, int64_t h) const { return (b * heads + h) * headdim * dstate; }
  int64_t state_size() const { return headdim * dstate; }  // one (batch, head) state, [P, N]
};

}  // namespace amor::ref
