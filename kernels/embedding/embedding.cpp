#include "kernels/embedding/embedding.h"

#include "kernels/core/check.h"
#include "kernels/embedding/embedding_ref.h"

namespace amor {
namespace {

// Every id in [0, vocab); the message names the first bad one, where it is, and V.
void check_ids(const char* op, const Tensor& ids, int64_t vocab) {
  check_dtype(op, "ids", ids, DType::I32);
  const int32_t* p = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    AMOR_CHECK(p[i] >= 0 && p[i] < vocab,
               "{}: id {} at position {} of ids {} is out of range for vocabulary size V={}", op,
               p[i], i, ids.str(), vocab);
}

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
  if (!weight.is_cpu()) fail_no_cuda(op, weight);
  AMOR_CHECK(ids.is_cpu(), "{}: ids {} and weight {} are on different devices", op, ids.str(),
             weight.str());
  const int64_t vocab = weight.size(0), d = weight.size(1);
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
  if (!dy.is_cpu()) fail_no_cuda(op, dy);
  AMOR_CHECK(ids.is_cpu(), "{}: ids {} and dy {} are on different devices", op, ids.str(),
             dy.str());
  check_ids(op, ids, vocab);
  const int64_t d = dy.size(-1);
  Tensor dw = Tensor::empty({vocab, d}, dy.dtype(), dy.device());
  dispatch_float(op, dy, [&](auto tag) {
    using T = decltype(tag);
    ref::embedding_backward(ids.data<int32_t>(), dy.data<T>(), dw.data<T>(), ids.numel(), vocab, d);
  });
  return dw;
}

}  // namespace amor
