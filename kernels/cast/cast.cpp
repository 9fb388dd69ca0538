#include "kernels/cast/cast.h"

#include "kernels/core/check.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/cast/cast_cuda.h"
#include "kernels/cast/cuda_args.h"
#endif

namespace amor {
namespace {

bool overlap(const Tensor& a, const Tensor& b) {
  auto lo_a = static_cast<const char*>(a.raw_data()), lo_b = static_cast<const char*>(b.raw_data());
  return a.nbytes() > 0 && b.nbytes() > 0 && lo_a < lo_b + b.nbytes() && lo_b < lo_a + a.nbytes();
}

#ifdef AMOR_HAVE_CUDA
void check_cuda_pair(const char* op, const Tensor& src, DType to) {
  AMOR_CHECK((src.dtype() == DType::F32 || src.dtype() == DType::BF16) &&
                 (to == DType::F32 || to == DType::BF16),
             "{}: on cuda only f32 and bf16 convert, got {} -> {}", op, src.str(), dtype_name(to));
}
#endif

}  // namespace

Tensor cast(const Tensor& x, DType to) {
  const char* op = "cast";
  check_defined(op, "x", x);
  if (x.dtype() == to) return x;
  if (x.is_cpu()) return x.to(to);
#ifdef AMOR_HAVE_CUDA
  check_cuda_pair(op, x, to);
  Tensor y = Tensor::empty(x.shape(), to, x.device());
  cuda::cast(x.dtype(), x.raw_data(), to, y.raw_data(), x.numel());
  return y;
#else
  fail_no_cuda(op, x);
#endif
}

void cast_into(const Tensor& src, Tensor& dst) {
  const char* op = "cast_into";
  check_defined(op, "src", src);
  check_defined(op, "dst", dst);
  AMOR_CHECK(src.shape() == dst.shape() && src.device() == dst.device(),
             "{}: src {} and dst {} must have one shape and one device", op, src.str(), dst.str());
  if (src.dtype() == dst.dtype() && src.raw_data() == dst.raw_data()) return;  // the same tensor
  AMOR_CHECK(!overlap(src, dst), "{}: src {} and dst {} overlap in memory", op, src.str(),
             dst.str());
  if (src.dtype() == dst.dtype()) {
    dst.copy_from(src);
    return;
  }
  if (src.is_cpu()) {
    dst.copy_from(src.to(dst.dtype()));
    return;
  }
#ifdef AMOR_HAVE_CUDA
  check_cuda_pair(op, src, dst.dtype());
  cuda::cast(src.dtype(), src.raw_data(), dst.dtype(), dst.raw_data(), src.numel());
#else
  fail_no_cuda(op, src);
#endif
}

}  // namespace amor
