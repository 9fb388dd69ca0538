#include "models/infer/recurrent_state.h"

#include "kernels/conv1d/conv1d.h"
#include "kernels/core/check.h"
#include "kernels/gated_delta/gated_delta.h"
#include "kernels/ssd/ssd.h"
#include "models/core/scan_dtype.h"

namespace amor::model {

namespace {
// A [B, rest...] tensor without its time axis of length 1: [B,1,a,b] -> [B,a,b].
Tensor drop_time(const Tensor& t) {
  Shape s = t.shape();
  s.erase(s.begin() + 1);
  return t.view(s);
}
}  // namespace

Tensor conv_infer(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                  Tensor& state) {
  check_dim("conv_infer", "x", x, 3);
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), K = weight.size(1);
  if (T == 1) {
    if (!state.defined()) state = Tensor::zeros({B, C, K - 1}, x.dtype(), x.device());
    return conv1d_step(drop_time(x), state, weight, bias, silu).view({B, 1, C});
  }
  Conv1dOutput o = conv1d_forward(x, weight, bias, silu, state);
  state = o.final_state;
  return o.y;
}

Tensor ssd_infer(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                 const Tensor& Cm, const Tensor& D, int64_t chunk, Tensor& state) {
  check_dim("ssd_infer", "x", x, 4);
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), P = x.size(3), N = Bm.size(3);
  if (T == 1) {
    if (!state.defined()) state = Tensor::zeros({B, H, P, N}, scan_state_dtype(x), x.device());
    return ssd_step(drop_time(x), drop_time(dt), A, drop_time(Bm), drop_time(Cm), D, state)
        .view({B, 1, H, P});
  }
  SsdOut o = ssd_forward(x, dt, A, Bm, Cm, D, state, chunk);
  state = o.final_state;
  return o.y;
}

Tensor gated_delta_infer(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                         const Tensor& beta, double scale, int64_t chunk, Tensor& state) {
  check_dim("gated_delta_infer", "v", v, 4);
  const int64_t B = v.size(0), T = v.size(1), H = v.size(2), V = v.size(3), K = k.size(3);
  if (T == 1) {
    if (!state.defined()) state = Tensor::zeros({B, H, K, V}, scan_state_dtype(v), v.device());
    return gated_delta_step(drop_time(q), drop_time(k), drop_time(v), drop_time(g),
                            drop_time(beta), scale, state)
        .view({B, 1, H, V});
  }
  GatedDeltaOut o = gated_delta_forward(q, k, v, g, beta, state, scale, chunk);
  state = o.final_state;
  return o.o;
}

Tensor join_states(const Tensor& a, const Tensor& b, const char* what) {
  if (!a.defined() && !b.defined()) return Tensor();
  AMOR_CHECK(a.defined() && b.defined(),
             "join_states: {}: one set of sequences has no state yet (join caches after their prefill)", what);
  Shape rest_a = a.shape(), rest_b = b.shape();
  rest_a.erase(rest_a.begin());
  rest_b.erase(rest_b.begin());
  AMOR_CHECK(rest_a == rest_b && a.dtype() == b.dtype() && a.device() == b.device(),
             "join_states: {}: states {} and {} do not join", what, a.str(), b.str());
  Shape s = a.shape();
  s[0] = a.size(0) + b.size(0);
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  out.slice_flat(0, {a.numel()}).copy_from(a.view({a.numel()}));
  out.slice_flat(a.numel(), {b.numel()}).copy_from(b.view({b.numel()}));
  return out;
}

}  // namespace amor::model
