// Mamba2 SSD scan (design §3):  h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,  y_t = h_t C_t + D x_t.
//
//   x [B,T,H,P]  dt [B,T,H] (> 0, softplus already applied)  A [H] (< 0)
//   B, C [B,T,G,N] (head h uses group h / (H/G))  D [H]
//   initial_state [B,H,P,N] or undefined (zeros); outputs y [B,T,H,P], final_state [B,H,P,N].
//
// chunk_size > 0 runs the chunked SSD algorithm (ssd_chunked_ref.h), the form the CUDA kernels
// take; chunk_size = 0 runs the step-by-step recurrence (ssd_recurrent_ref.h). Both give the same
// result up to rounding, for any T (T need not be a multiple of the chunk).
//
// On cuda (ssd_*_cuda.cu; chunked only, chunk_size 1..128): x, B, C, dy are f32 or bf16 (one
// dtype) and y, dx, dB, dC take that dtype; dt, A, D, initial_state, d_final_state and the decode
// state are f32, and so are final_state, ddt, dA, dD and dinitial_state. All arithmetic is f32.
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

// saved: with keep_for_backward on the GPU, the forward's intermediates that the backward would
// otherwise recompute (an opaque f32 buffer: the chunk log-decay cumsums and the state entering
// every chunk, bf16 on the default bf16 path: 4 + 2 P N / Q bytes per token and head, 260 B at
// P 64, N 128, chunk 64; f32 elsewhere, 516 B; ssd_cuda.h says what and how large); undefined on
// the CPU and without keep_for_backward. Passing it to ssd_backward with the same inputs skips
// the recomputation (the backward's rerun of the forward's state passes) and gives the same bits.
struct SsdOut {
  Tensor y, final_state, saved;
};
SsdOut ssd_forward(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                   const Tensor& C, const Tensor& D, const Tensor& initial_state,
                   int64_t chunk_size = 64, bool keep_for_backward = false);

// Whether a training forward should keep its intermediates for the backward (keep_for_backward):
// yes unless the environment sets AMOR_SSD_RECOMPUTE=1 (recompute in the backward, the memory
// back). Read once per process; Mamba2Mixer and bench-ssd ask it.
bool ssd_keep_for_backward_default();

// dy [B,T,H,P]; d_final_state [B,H,P,N] or undefined (the final state is not used).
// dinitial_state is undefined when initial_state is. saved: undefined, or SsdOut::saved of the
// forward with the same inputs (and chunk_size).
struct SsdGrads {
  Tensor dx, ddt, dA, dB, dC, dD, dinitial_state;
};
SsdGrads ssd_backward(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                      const Tensor& C, const Tensor& D, const Tensor& initial_state,
                      const Tensor& dy, const Tensor& d_final_state, int64_t chunk_size = 64,
                      const Tensor& saved = Tensor() /*SsdOut::saved*/);

// One decode step: x [B,H,P], dt [B,H], A [H], B, C [B,G,N], D [H]; state [B,H,P,N] is updated
// in place (h <- exp(dt A) h + dt x B^T). Returns y [B,H,P].
Tensor ssd_step(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& B,
                const Tensor& C, const Tensor& D, const Tensor& state);

}  // namespace amor
