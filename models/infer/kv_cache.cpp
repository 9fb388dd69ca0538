#include "models/infer/kv_cache.h"

#include <algorithm>

#include "kernels/attention/attention.h"
#include "kernels/core/check.h"

namespace amor::model {

Tensor KvCache::row(const Tensor& t, int64_t b) const {
  return t.slice_flat(b * capacity_ * heads_ * dim_, {1, length_, heads_, dim_});
}

void KvCache::reserve(int64_t capacity) {
  if (capacity <= capacity_) return;
  Tensor k = Tensor::empty({batch_, capacity, heads_, dim_}, dtype_, device_);
  Tensor v = Tensor::empty({batch_, capacity, heads_, dim_}, dtype_, device_);
  if (length_ > 0) {
    const int64_t n = length_ * heads_ * dim_;
    for (int64_t b = 0; b < batch_; ++b) {
      k.slice_flat(b * capacity * heads_ * dim_, {n}).copy_from(k_.slice_flat(b * capacity_ * heads_ * dim_, {n}));
      v.slice_flat(b * capacity * heads_ * dim_, {n}).copy_from(v_.slice_flat(b * capacity_ * heads_ * dim_, {n}));
    }
  }
  k_ = k;
  v_ = v;
  capacity_ = capacity;
}

void KvCache::append(const Tensor& k, const Tensor& v) {
  const char* op = "KvCache::append";
  check_dim(op, "k", k, 4);
  check_shape(op, "v", v, k.shape());
  const int64_t B = k.size(0), T = k.size(1);
  if (batch_ == 0) {  // the first append fixes the layout
    batch_ = B;
    heads_ = k.size(2);
    dim_ = k.size(3);
    dtype_ = k.dtype();
    device_ = k.device();
  }
  AMOR_CHECK(B == batch_ && k.size(2) == heads_ && k.size(3) == dim_ && k.dtype() == dtype_,
             "{}: k is {}, the cache holds {} sequences of [{},{}] {} keys", op, k.str(), batch_,
             heads_, dim_, dtype_name(dtype_));
  if (length_ + T > capacity_) reserve(std::max({length_ + T, 2 * capacity_, int64_t{16}}));
  const int64_t n = T * heads_ * dim_;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t at = (b * capacity_ + length_) * heads_ * dim_;
    k_.slice_flat(at, {n}).copy_from(k.slice_flat(b * n, {n}));
    v_.slice_flat(at, {n}).copy_from(v.slice_flat(b * n, {n}));
  }
  length_ += T;
}

Tensor KvCache::attend(const Tensor& q, const Tensor& gate) const {
  const char* op = "KvCache::attend";
  check_dim(op, "q", q, 4);
  const int64_t B = q.size(0), Tq = q.size(1), H = q.size(2), D = q.size(3);
  AMOR_CHECK(B == batch_ && Tq <= length_,
             "{}: q is {}, but the cache holds {} sequences of {} tokens (queries are the last "
             "positions of the cache)",
             op, q.str(), batch_, length_);
  if (gate.defined()) check_shape(op, "gate", gate, {B, Tq});
  if (B == 1) return attention_forward(q, keys(0), values(0), gate).o;
  Tensor o = Tensor::empty(q.shape(), q.dtype(), q.device());
  const int64_t n = Tq * H * D;
  for (int64_t b = 0; b < B; ++b) {
    Tensor g = gate.defined() ? gate.slice_flat(b * Tq, {1, Tq}) : Tensor();
    Tensor ob = attention_forward(q.slice_flat(b * n, {1, Tq, H, D}), keys(b), values(b), g).o;
    o.slice_flat(b * n, {1, Tq, H, D}).copy_from(ob);
  }
  return o;
}

}  // namespace amor::model
