// Tied LM head fused with cross-entropy and normalised entropy: the plain-loop reference.
//
// For token n with hidden state h_n (length D) and the tied embedding W (V x D):
//   z_v      = <h_n, W_v>                       logits, v = 0..V-1
//   lse      = log sum_v exp(z_v)
//   loss     = lse - z_target                   (0 when target == -100, the ignore index)
//   p_v      = exp(z_v - lse)
//   H        = -sum_v p_v log p_v = lse - sum_v p_v z_v
//   entropy  = H / log V                        (in [0, 1]; AMOR's gate statistic)
//
// The logits are never held for the whole vocabulary: they are formed one vocab chunk at a time
// and folded into an online-softmax state (m, s, t) with m the running max,
//   s = sum_v exp(z_v - m),   t = sum_v exp(z_v - m) (z_v - m),
// so that lse = m + log s and H = log s - t / s. Keeping t relative to m (rather than
// sum exp(z-m) z) avoids the cancellation lse - sum p z when the logits share a large offset.
// When a new chunk raises the max from m to M, both are rescaled by a = exp(m - M), and t picks
// up the shift: t <- a (t + s (m - M)).
//
// Backward (the entropy is detached by design, so only the loss has a gradient):
//   dz_v = dloss_n (p_v - [v == target]),   dh_n = sum_v dz_v W_v,   dW_v += dz_v h_n,
// with dz = 0 for ignored tokens. Here p_v is recomputed from z_v and the saved lse.
//
// T is float or double. Targets are i32; callers check their range.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace amor::ref {

inline constexpr int32_t kIgnoreIndex = -100;

// The online-softmax state of one token; add_chunk folds in logits z[0..n). s and t are summed
// in double whatever T is: in float, sums over a 128256-word vocabulary lost ~1e-5 (relative) in
// lse and the entropy, and lse's error fed the gradient; double costs nothing here.
template <class T>
struct OnlineSoftmax {
  T m = -std::numeric_limits<T>::infinity();
  double s = 0;
  double t = 0;

  void add_chunk(const T* z, int64_t n) {
    T chunk_max = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) chunk_max = std::max(chunk_max, z[j]);
    T M = std::max(m, chunk_max);
    if (s > 0) {  // rescale what we have (nothing to rescale before the first chunk)
      double a = std::exp(double(m) - double(M));
      t = a * (t + s * (double(m) - double(M)));
      s = a * s;
    }
    m = M;
    for (int64_t j = 0; j < n; ++j) {
      T e = std::exp(z[j] - m);
      s += e;
      t += double(e) * double(z[j] - m);
    }
  }
  T lse() const { return T(double(m) + std::log(s)); }
  // H / log V, the normalisation in double too, so uniform logits give exactly 1.
  T entropy_norm(int64_t V) const { return T((std::log(s) - t / s) / std::log(double(V))); }
};

// targets may be null (entropy only; loss is then not written). loss may be null.
template <class T>
void lm_head_loss_forward(const T* h, const T* W, const int32_t* targets, T* loss, T* entropy_norm,
                          T* lse, int64_t N, int64_t V, int64_t D, int64_t vocab_chunk) {
  std::vector<T> z(static_cast<size_t>(std::min(vocab_chunk, V)));
  for (int64_t n = 0; n < N; ++n) {
    const T* hn = h + n * D;
    const int32_t target = targets ? targets[n] : kIgnoreIndex;
    OnlineSoftmax<T> st;
    T z_target = 0;
    for (int64_t c0 = 0; c0 < V; c0 += vocab_chunk) {
      const int64_t c1 = std::min(V, c0 + vocab_chunk);
      for (int64_t v = c0; v < c1; ++v) {
        T acc = 0;
        for (int64_t d = 0; d < D; ++d) acc += hn[d] * W[v * D + d];
        z[v - c0] = acc;
        if (v == target) z_target = acc;
      }
      st.add_chunk(z.data(), c1 - c0);
    }
    const T l = st.lse();
    if (lse) lse[n] = l;
    if (loss) loss[n] = target == kIgnoreIndex ? T(0) : l - z_target;
    entropy_norm[n] = st.entropy_norm(V);
  }
}

// dh [N,D] and dW [V,D] are overwritten.
template <class T>
void lm_head_loss_backward(const T* h, const T* W, const int32_t* targets, const T* lse,
                           const T* dloss, T* dh, T* dW, int64_t N, int64_t V, int64_t D) {
  std::fill(dh, dh + N * D, T(0));
  std::fill(dW, dW + V * D, T(0));
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == kIgnoreIndex) continue;
    const T* hn = h + n * D;
    for (int64_t v = 0; v < V; ++v) {
      T z = 0;
      for (int64_t d = 0; d < D; ++d) z += hn[d] * W[v * D + d];
      T dz = dloss[n] * (std::exp(z - lse[n]) - (v == targets[n] ? T(1) : T(0)));
      for (int64_t d = 0; d < D; ++d) {
        dh[n * D + d] += dz * W[v * D + d];
        dW[v * D + d] += dz * hn[d];
      }
    }
  }
}

}  // namespace amor::ref
