// Rotary position embedding with the half-split rotation x*cos + rotate_half(x)*sin (Llama / HF),
// theta_i = base^(-2i/Dh), on per-head tensors [B,T,H,Dh] (Dh even). Math: rope_ref.h.
// The backward is the rotation by the negative angle; it takes only dy since RoPE is linear in x.
// Dtypes: f32/f64 on the cpu; f32 or bf16 on cuda (angles in f64, rotation in f32).
#pragma once
#include <cstdint>

#include "kernels/core/tensor.h"

namespace amor {

// Token t of every sequence sits at position position_offset + t (decode passes the cache length).
Tensor rope_forward(const Tensor& x, int64_t position_offset = 0, double base = 10000.0);
Tensor rope_backward(const Tensor& dy, int64_t position_offset = 0, double base = 10000.0);

// Explicit positions, i64 [T] (shared by the batch) or [B,T] (per sequence, e.g. packed
// documents restarting at 0), each >= 0. For cuda x they may be on either device (they are
// checked on the host and sent to the device as [B*T]).
Tensor rope_forward_positions(const Tensor& x, const Tensor& positions, double base = 10000.0);
Tensor rope_backward_positions(const Tensor& dy, const Tensor& positions, double base = 10000.0);

// A decode step over a KV cache (models/infer/kv_cache.h): token t of sequence b at position
// lengths[b] + t, lengths i32 [B] on x's device. On cuda the kernel reads the lengths where they
// are (nothing passes through the host, so a captured CUDA graph replays the call while the
// lengths advance on the device; values are not checked there); the cpu checks them (>= 0).
// Bitwise the rotation rope_forward_positions gives at those positions, on either device.
Tensor rope_forward_lengths(const Tensor& x, const Tensor& lengths, double base = 10000.0);

}  // namespace amor
