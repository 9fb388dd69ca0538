#include "kernels/kv_append/kv_append.h"

#include <cstring>

#include "kernels/cast/cuda_args.h"
#include "kernels/core/check.h"

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

}  // namespace amor
