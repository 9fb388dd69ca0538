// Rotary position embedding, half-split form (Llama / HF: x*cos + rotate_half(x)*sin), on
// x [B,T,H,Dh] with Dh even. For the token at (b,t) with position p = pos[b*T + t] and each
// i in [0, Dh/2):
//
//   theta_i = base^(-2i/Dh),  a = p * theta_i
//   (x1, x2) = (x[..., i], x[..., i + Dh/2])
//   y1 = x1 cos(a) - x2 sin(a)
//   y2 = x2 cos(a) + x1 sin(a)
//
// The rotation is orthogonal, so the backward is the rotation by -a (its transpose):
//   dx1 = dy1 cos(a) + dy2 sin(a),  dx2 = dy2 cos(a) - dy1 sin(a)
//
// Angles, cos, sin and the rotation are computed in double and rounded to T once: a float angle
// p * theta would lose ~p * 6e-8 radians, which is 3e-4 at p = 5000.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace amor::ref {

// inverse = false: the forward rotation; true: the backward (rotation by -a). x may equal y.
template <class T>
void rope_rotate(const T* x, T* y, const int64_t* pos, int64_t B, int64_t Tn, int64_t H, int64_t Dh,
                 double base, bool inverse) {
  const int64_t half = Dh / 2;
  std::vector<double> theta(half);
  for (int64_t i = 0; i < half; ++i) theta[i] = std::pow(base, -2.0 * double(i) / double(Dh));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < Tn; ++t) {
      const double p = double(pos[b * Tn + t]);
      for (int64_t i = 0; i < half; ++i) {
        const double a = p * theta[i];
        const double c = std::cos(a), s = inverse ? -std::sin(a) : std::sin(a);
        for (int64_t h = 0; h < H; ++h) {
          const int64_t o = ((b * Tn + t) * H + h) * Dh;
          const double x1 = x[o + i], x2 = x[o + i + half];
          y[o + i] = static_cast<T>(x1 * c - x2 * s);
          y[o + i + half] = static_cast<T>(x2 * c + x1 * s);
        }
      }
    }
  }
}

}  // namespace amor::ref
