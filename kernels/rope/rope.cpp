#include "kernels/rope/rope.h"

#include <cmath>
#include <vector>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/rope/rope_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/rope/rope_cuda.h"
#endif

namespace amor {
namespace {

void check_x(const char* op, const char* name, const Tensor& x, double base) {
  check_float_args(op, {{name, &x}});
  check_dim(op, name, x, 4);
  AMOR_CHECK(x.size(3) % 2 == 0,
             "{}: argument '{}' is {}, expected [B,T,H,Dh] with an even head dim Dh", op, name,
             x.str());
  AMOR_CHECK(std::isfinite(base) && base > 0, "{}: base must be finite and > 0, got {}", op, base);
  if (!x.is_cpu()) {
    check_cuda_storage(op, name, x);
    check_cuda_int_range(op, "H * Dh", x.size(2) * x.size(3));
  }
}

// The position of every (b, t), flattened [B*T].
std::vector<int64_t> offset_positions(const char* op, const Tensor& x, int64_t offset) {
  AMOR_CHECK(offset >= 0, "{}: position_offset must be >= 0, got {}", op, offset);
  std::vector<int64_t> pos(x.size(0) * x.size(1));
  for (int64_t b = 0; b < x.size(0); ++b)
    for (int64_t t = 0; t < x.size(1); ++t) pos[b * x.size(1) + t] = offset + t;
  return pos;
}

// Positions may live on either device (cuda ones are copied to the host to be checked).
std::vector<int64_t> explicit_positions(const char* op, const Tensor& x, const Tensor& positions) {
  check_dtype(op, "positions", positions, DType::I64);
  AMOR_CHECK(positions.is_cpu() || !x.is_cpu(),
             "{}: positions {} must be on the cpu for a cpu tensor {}", op, positions.str(),
             x.str());
  const int64_t B = x.size(0), T = x.size(1);
  const bool per_batch = positions.dim() == 2;
  if (per_batch) {
    check_shape(op, "positions", positions, {B, T});
  } else {
    check_shape(op, "positions", positions, {T});
  }
  const Tensor host = positions.to(Device::CPU);
  const int64_t* p = host.data<int64_t>();
  std::vector<int64_t> pos(B * T);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t k = per_batch ? b * T + t : t;
      AMOR_CHECK(p[k] >= 0, "{}: position {} at index {} of positions {} is negative", op, p[k], k,
                 positions.str());
      pos[b * T + t] = p[k];
    }
  }
  return pos;
}

#ifdef AMOR_HAVE_CUDA
// positions: i64 [B*T] on the device, or undefined for offset + t.
Tensor rotate_cuda(const Tensor& x, const Tensor& positions, int64_t offset, double base,
                   bool inverse) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  cuda::rope_rotate(x.dtype(), x.raw_data(), y.raw_data(),
                    positions.defined() ? positions.data<int64_t>() : nullptr, offset, x.size(0),
                    x.size(1), x.size(2), x.size(3), base, inverse);
  return y;
}
#endif

Tensor rotate(const char* op, const Tensor& x, const std::vector<int64_t>& pos, double base,
              bool inverse) {
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, const int64_t n = static_cast<int64_t>(pos.size());
                 return rotate_cuda(x, Tensor::from_vector<int64_t>({n}, pos).to(x.device()), 0,
                                    base, inverse));
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float(op, x, [&](auto tag) {
    using T = decltype(tag);
    ref::rope_rotate(x.data<T>(), y.data<T>(), pos.data(), x.size(0), x.size(1), x.size(2),
                     x.size(3), base, inverse);
  });
  return y;
}

}  // namespace

Tensor rope_forward(const Tensor& x, int64_t position_offset, double base) {
  const char* op = "rope_forward";
  check_x(op, "x", x, base);
  if (!x.is_cpu()) {
    AMOR_CHECK(position_offset >= 0, "{}: position_offset must be >= 0, got {}", op,
               position_offset);
    AMOR_ON_CUDA(op, x, return rotate_cuda(x, Tensor(), position_offset, base, false));
  }
  return rotate(op, x, offset_positions(op, x, position_offset), base, false);
}

Tensor rope_backward(const Tensor& dy, int64_t position_offset, double base) {
  const char* op = "rope_backward";
  check_x(op, "dy", dy, base);
  if (!dy.is_cpu()) {
    AMOR_CHECK(position_offset >= 0, "{}: position_offset must be >= 0, got {}", op,
               position_offset);
    AMOR_ON_CUDA(op, dy, return rotate_cuda(dy, Tensor(), position_offset, base, true));
  }
  return rotate(op, dy, offset_positions(op, dy, position_offset), base, true);
}

Tensor rope_forward_positions(const Tensor& x, const Tensor& positions, double base) {
  const char* op = "rope_forward_positions";
  check_x(op, "x", x, base);
  return rotate(op, x, explicit_positions(op, x, positions), base, false);
}

Tensor rope_backward_positions(const Tensor& dy, const Tensor& positions, double base) {
  const char* op = "rope_backward_positions";
  check_x(op, "dy", dy, base);
  return rotate(op, dy, explicit_positions(op, dy, positions), base, true);
}

Tensor rope_forward_lengths(const Tensor& x, const Tensor& lengths, double base) {
  const char* op = "rope_forward_lengths";
  check_x(op, "x", x, base);
  check_dtype(op, "lengths", lengths, DType::I32);
  const int64_t B = x.size(0), T = x.size(1);
  check_shape(op, "lengths", lengths, {B});
  AMOR_CHECK(lengths.device() == x.device(),
             "{}: lengths {} must be on the device of x {} (they are read there)", op,
             lengths.str(), x.str());
  if (!x.is_cpu()) {
    AMOR_ON_CUDA(op, x, Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
                 cuda::rope_rotate_lengths(x.dtype(), x.raw_data(), y.raw_data(),
                                           lengths.data<int32_t>(), B, T, x.size(2), x.size(3),
                                           base, false);
                 return y);
  }
  const int32_t* len = lengths.data<int32_t>();
  std::vector<int64_t> pos(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    AMOR_CHECK(len[b] >= 0, "{}: length {} of sequence {} is negative", op, len[b], b);
    for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(b * T + t)] = int64_t(len[b]) + t;
  }
  return rotate(op, x, pos, base, false);
}

}  // namespace amor
