#include "kernels/embedding/embedding.h"

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/embedding/embedding_ref.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/embedding/embedding_cuda.h"
#endif

namespace amor {
namespace {

void fail_bad_id(const char* op, const Tensor& ids, int64_t position, int32_t id, int64_t vocab) {
  throw Error(fmt::format(
      "{}: id {} at position {} of ids {} is out of range for vocabulary size V={}", op, id,
      position, ids.str(), vocab));
}

// Every id (of cpu ids) in [0, vocab); the message names the first bad one, where it is, and V.
void check_ids(const char* op, const Tensor& ids, int64_t vocab) {
  check_dtype(op, "ids", ids, DType::I32);
  const int32_t* p = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab) fail_bad_id(op, ids, i, p[i], vocab);
}

#ifdef AMOR_HAVE_CUDA
// The kernels check the ids on the device; with nothing to copy they never look, so check here.
void check_ids_cuda(const char* op, const Tensor& ids, int64_t vocab, int64_t d) {
  if (d == 0) check_ids(op, ids.to(Device::CPU), vocab);
}

void raise_if_bad(const char* op, const Tensor& ids, cuda::BadId bad, int64_t vocab) {
  if (bad.position >= 0) fail_bad_id(op, ids, bad.position, bad.id, vocab);
}
#endif

Shape with_dim(Shape s, int64_t last) {
  s.push_back(last);
  return s;
}

}  // namespace

Tensor embedding_forward(const Tensor& ids, const Tensor& weight) {
  const char* op = "embedding_forward";
  check_defined(op, "ids", ids);
  check_float_args(op, {{"weight", &weight}});
  check_dim(op, "weight", weight, 2);
  AMOR_CHECK(ids.device() == weight.device(), "{}: ids {} and weight {} are on different devices",
             op, ids.str(), weight.str());
  const int64_t vocab = weight.size(0), d = weight.size(1);
  if (!weight.is_cpu()) {
    check_cuda_storage(op, "weight", weight);
    check_dtype(op, "ids", ids, DType::I32);
    AMOR_ON_CUDA(op, weight, check_ids_cuda(op, ids, vocab, d);
                 Tensor y =
                     Tensor::empty(with_dim(ids.shape(), d), weight.dtype(), weight.device());
                 Tensor flag = Tensor::empty({1}, DType::I64, weight.device());
                 raise_if_bad(op, ids,
                              cuda::embedding_forward(
                                  weight.dtype(), ids.data<int32_t>(), weight.raw_data(),
                                  y.raw_data(), ids.numel(), vocab, d,
                                  static_cast<unsigned long long*>(flag.raw_data())),
                              vocab);
                 return y);
  }
  check_ids(op, ids, vocab);
  Tensor y = Tensor::empty(with_dim(ids.shape(), d), weight.dtype(), weight.device());
  dispatch_float(op, weight, [&](auto tag) {
    using T = decltype(tag);
    ref::embedding_forward(ids.data<int32_t>(), weight.data<T>(), y.data<T>(), ids.numel(), d);
  });
  return y;
}

Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t vocab) {
  const char* op = "embedding_backward";
  check_defined(op, "ids", ids);
  check_float_args(op, {{"dy", &dy}});
  AMOR_CHECK(vocab > 0, "{}: vocab must be positive, got {}", op, vocab);
  check_shape(op, "dy", dy, with_dim(ids.shape(), kAny));
  AMOR_CHECK(ids.device() == dy.device(), "{}: ids {} and dy {} are on different devices", op,
             ids.str(), dy.str());
  const int64_t d = dy.size(-1);
  if (!dy.is_cpu()) {
    check_cuda_storage(op, "dy", dy);
    check_dtype(op, "ids", ids, DType::I32);
    AMOR_ON_CUDA(op, dy, check_ids_cuda(op, ids, vocab, d);
                 Tensor dw = Tensor::empty({vocab, d}, DType::F32, dy.device());
                 Tensor flag = Tensor::empty({1}, DType::I64, dy.device());
                 raise_if_bad(op, ids,
                              cuda::embedding_backward(
                                  dy.dtype(), ids.data<int32_t>(), dy.raw_data(),
                                  dw.data<float>(), ids.numel(), vocab, d,
                                  static_cast<unsigned long long*>(flag.raw_data())),
                              vocab);
                 return dw);
  }
  check_ids(op, ids, vocab);
  Tensor dw = Tensor::empty({vocab, d}, dy.dtype(), dy.device());
  dispatch_float(op, dy, [&](auto tag) {
    using T = decltype(tag);
    ref::embedding_backward(ids.data<int32_t>(), dy.data<T>(), dw.data<T>(), ids.numel(), vocab, d);
  });
  return dw;
}

}  // namespace amor
