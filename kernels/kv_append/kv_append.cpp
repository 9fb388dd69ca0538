#include "kernels/kv_append/kv_append.h"

#include <cmath>
#include <cstring>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"
#include "kernels/rope/rope.h"

#ifdef AMOR_HAVE_CUDA
#include "kernels/kv_append/kv_append_cuda.h"
#endif

namespace amor {

void kv_append_step(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k, const Tensor& v,
                    const Tensor& lengths) {
  const char* op = "kv_append_step";
  check_dim(op, "k_cache", k_cache, 4);
  check_dim(op, "k", k, 4);
  const int64_t B = k_cache.size(0), C = k_cache.size(1), Hkv = k_cache.size(2), D = k_cache.size(3);
  check_shape(op, "v_cache", v_cache, k_cache.shape());
  check_shape(op, "k", k, {B, 1, Hkv, D});
  check_shape(op, "v", v, {B, 1, Hkv, D});
  check_dtype(op, "lengths", lengths, DType::I32);
  check_shape(op, "lengths", lengths, {B});
  for (const Tensor* t : {&v_cache, &k, &v})
    AMOR_CHECK(t->dtype() == k_cache.dtype(), "{}: {} and k_cache {} differ in dtype", op, t->str(),
               k_cache.str());
  for (const Tensor* t : {&v_cache, &k, &v, &lengths})
    AMOR_CHECK(t->device() == k_cache.device(), "{}: {} and k_cache {} are on different devices", op,
               t->str(), k_cache.str());
  const int64_t row = Hkv * D;
  if (!k_cache.is_cpu()) {
    check_cuda_storage(op, "k_cache", k_cache);
    check_cuda_int_range(op, "Hkv * D", row);
    AMOR_ON_CUDA(op, k_cache,
                 cuda::kv_append_step(k_cache.dtype(), k_cache.raw_data(), v_cache.raw_data(),
                                      k.raw_data(), v.raw_data(), lengths.data<int32_t>(), B, C, row);
                 return);
  }
  int32_t* len = lengths.data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    AMOR_CHECK(len[b] >= 0 && len[b] < C,
               "{}: sequence {} holds {} of the cache's {} rows: no room for another token", op, b,
               len[b], C);
  const size_t bytes = static_cast<size_t>(row) * dtype_size(k_cache.dtype());
  auto* kc = static_cast<unsigned char*>(k_cache.raw_data());
  auto* vc = static_cast<unsigned char*>(v_cache.raw_data());
  const auto* ks = static_cast<const unsigned char*>(k.raw_data());
  const auto* vs = static_cast<const unsigned char*>(v.raw_data());
  for (int64_t b = 0; b < B; ++b) {
    const size_t dst = static_cast<size_t>(b * C + len[b]) * bytes, src = static_cast<size_t>(b) * bytes;
    std::memcpy(kc + dst, ks + src, bytes);
    std::memcpy(vc + dst, vs + src, bytes);
    ++len[b];
  }
}

Tensor kv_rope_append_step(const Tensor& qkv, int64_t q_heads, const Tensor& k_cache,
                           const Tensor& v_cache, const Tensor& lengths, double base) {
  const char* op = "kv_rope_append_step";
  check_dim(op, "k_cache", k_cache, 4);
  check_dim(op, "qkv", qkv, 3);
  const int64_t B = k_cache.size(0), C = k_cache.size(1), Hkv = k_cache.size(2);
  const int64_t D = k_cache.size(3);
  AMOR_CHECK(D % 2 == 0,
             "{}: argument 'k_cache' is {}, expected [B,C,Hkv,D] with an even head dim D", op,
             k_cache.str());
  AMOR_CHECK(q_heads >= 1, "{}: q_heads must be >= 1, got {}", op, q_heads);
  AMOR_CHECK(std::isfinite(base) && base > 0, "{}: base must be finite and > 0, got {}", op, base);
  check_shape(op, "v_cache", v_cache, k_cache.shape());
  const int64_t width = (q_heads + 2 * Hkv) * D;
  check_shape(op, "qkv", qkv, {B, 1, kAny});
  AMOR_CHECK(qkv.size(2) == width,
             "{}: argument 'qkv' is {}, expected its last dim (q_heads + 2 Hkv) D = "
             "({} + 2*{})*{} = {}",
             op, qkv.str(), q_heads, Hkv, D, width);
  check_dtype(op, "lengths", lengths, DType::I32);
  check_shape(op, "lengths", lengths, {B});
  for (const Tensor* t : {&v_cache, &qkv})
    AMOR_CHECK(t->dtype() == k_cache.dtype(), "{}: {} and k_cache {} differ in dtype", op, t->str(),
               k_cache.str());
  for (const Tensor* t : {&v_cache, &qkv, &lengths})
    AMOR_CHECK(t->device() == k_cache.device(), "{}: {} and k_cache {} are on different devices",
               op, t->str(), k_cache.str());
  const DType dt = k_cache.dtype();
  if (!k_cache.is_cpu()) {
    check_cuda_storage(op, "k_cache", k_cache);
    check_cuda_int_range(op, "(q_heads + 2 Hkv) * D", width);
    AMOR_ON_CUDA(op, k_cache, Tensor q = Tensor::empty({B, 1, q_heads, D}, dt, k_cache.device());
                 cuda::kv_rope_append_step(dt, qkv.raw_data(), q.raw_data(), k_cache.raw_data(),
                                           v_cache.raw_data(), lengths.data<int32_t>(), B, C,
                                           q_heads, Hkv, D, base);
                 return q);
  }
  AMOR_CHECK(is_floating(dt),
             "{}: argument 'qkv' is {}, expected a floating dtype (RoPE rotates it)", op,
             qkv.str());
  // Every sequence first: nothing is written unless all of them can take the token.
  const int32_t* len = lengths.data<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    AMOR_CHECK(len[b] >= 0, "{}: length {} of sequence {} is negative", op, len[b], b);
    AMOR_CHECK(len[b] < C,
               "{}: sequence {} holds {} of the cache's {} rows: no room for another token", op, b,
               len[b], C);
  }
  // The composition of the references: Q, K and V split out of qkv, rotated, appended.
  Tensor q = Tensor::empty({B, 1, q_heads, D}, dt), k = Tensor::empty({B, 1, Hkv, D}, dt);
  Tensor v = Tensor::empty({B, 1, Hkv, D}, dt);
  const size_t es = dtype_size(dt), qb = size_t(q_heads * D) * es, kb = size_t(Hkv * D) * es;
  const auto* src = static_cast<const unsigned char*>(qkv.raw_data());
  for (int64_t b = 0; b < B; ++b) {
    const unsigned char* row = src + size_t(b * width) * es;
    std::memcpy(static_cast<unsigned char*>(q.raw_data()) + size_t(b) * qb, row, qb);
    std::memcpy(static_cast<unsigned char*>(k.raw_data()) + size_t(b) * kb, row + qb, kb);
    std::memcpy(static_cast<unsigned char*>(v.raw_data()) + size_t(b) * kb, row + qb + kb, kb);
  }
  // rope's cpu reference takes f32 and f64; other floating dtypes go through f32.
  const bool native = dt == DType::F32 || dt == DType::F64;
  auto rotate = [&](const Tensor& x) {
    return native ? rope_forward_lengths(x, lengths, base)
                  : rope_forward_lengths(x.to(DType::F32), lengths, base).to(dt);
  };
  Tensor q_rot = rotate(q);
  kv_append_step(k_cache, v_cache, rotate(k), v, lengths);
  return q_rot;
}

}  // namespace amor
