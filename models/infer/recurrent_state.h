// The recurrent parts of a mixer at inference, each continuing from a state it keeps current:
// a causal depthwise conv (state: the last K-1 inputs [B,C,K-1]), Mamba2's SSD scan (state
// [B,H,P,N]) and the gated delta rule (state [B,H,K,V]). An undefined state means "nothing seen
// yet" (zeros). One token (T == 1) runs the op's decode step on the state in place; more tokens
// run the full / chunked op from the state and keep its final state. Either way, feeding a
// sequence in any split equals one pass over it (up to rounding).
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor::model {

// x [B,T,C] -> y [B,T,C]; weight [C,K], bias [C] or undefined.
Tensor conv_infer(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                  Tensor& state);

// x [B,T,H,P], dt [B,T,H], A [H], Bm, Cm [B,T,G,N], D [H] -> y [B,T,H,P].
Tensor ssd_infer(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                 const Tensor& Cm, const Tensor& D, int64_t chunk, Tensor& state);

// q, k [B,T,H,K], v [B,T,H,V], g, beta [B,T,H] -> o [B,T,H,V].
Tensor gated_delta_infer(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, double scale, int64_t chunk, Tensor& state);

// The states of two sets of sequences as one, a's sequences first: [Ba,...] and [Bb,...] ->
// [Ba+Bb,...] (MixerCache::append_rows). Both undefined gives undefined; one undefined is an
// error naming `what` (a cache that has not run cannot say how many sequences it holds).
Tensor join_states(const Tensor& a, const Tensor& b, const char* what);

}  // namespace amor::model
