// CUDA == cpu reference for kv_append_step (a decode token written at each sequence's device-side
// length, which then advances; kernels/kv_append/kv_append.h): exact, f32 and bf16, the 16-byte
// path and the scalar one (a row of 3 x 5 elements), two steps in a row (the second reads the
// lengths the first advanced on the device), and a full sequence left as it was on the GPU. Then
// decode steps of one attention over a KV cache with its lengths on the device, as KvCache's step
// path runs them (models/infer/kv_cache.h): RoPE at the device lengths, the append that advances
// them, the attention of every sequence in one launch at the advanced lengths.
#include "kernels/attention/attention.h"
#include "kernels/kv_append/kv_append.h"
#include "kernels/rope/rope.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

TEST(CudaParity, KvAppendStep) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 9500;
  for (const Shape& cache : {Shape{3, 6, 2, 64}, Shape{2, 4, 3, 5}}) {
    const int64_t B = cache[0], C = cache[1];
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(dtype_name(dt));
      const Shape tok{B, 1, cache[2], cache[3]};
      Tensor kc = input(cache, ++seed, dt), vc = input(cache, ++seed, dt);
      Tensor gk = up(kc, dt), gv = up(vc, dt);
      std::vector<int32_t> lens = {0, int32_t(C - 2), 1};
      lens.resize(size_t(B));
      Tensor lengths = Tensor::from_vector<int32_t>({B}, lens), glen = lengths.to(Device::CUDA);
      for (int step = 0; step < 2; ++step) {
        Tensor k = input(tok, ++seed, dt), v = input(tok, ++seed, dt);
        kv_append_step(kc, vc, k, v, lengths);
        kv_append_step(gk, gv, up(k, dt), up(v, dt), glen);
        expect_equal("kv_append_step", "k_cache", gk, kc);
        expect_equal("kv_append_step", "v_cache", gv, vc);
        EXPECT_EQ(glen.to(Device::CPU).to_vector<int32_t>(), lengths.to_vector<int32_t>());
      }
      // Sequence 1 is full now: the GPU leaves its rows and length alone (the cpu refuses).
      Tensor k = input(tok, ++seed, dt), v = input(tok, ++seed, dt);
      EXPECT_THROW(kv_append_step(kc, vc, k, v, lengths), Error);
      kv_append_step(gk, gv, up(k, dt), up(v, dt), glen);
      const std::vector<int32_t> after = glen.to(Device::CPU).to_vector<int32_t>();
      EXPECT_EQ(after[1], C);
      EXPECT_EQ(after[0], lengths.to_vector<int32_t>()[0] + 1);
      const int64_t per = C * cache[2] * cache[3];
      expect_equal("kv_append_step", "full sequence's k rows", gk.slice_flat(per, {per}),
                   kc.slice_flat(per, {per}));
    }
  }
}

// Five decode steps of sequences at 3, 10 and 1 tokens over a storage of 24 rows (its rows past
// the lengths NaN: never read), the lengths never leaving the device between steps: each step's
// output against the cpu's (the same ops' references on the host lengths), the device lengths
// equal to the host's after every step. bf16 at head dim 64 (the split-KV kernel) and f32 (SIMT).
TEST(CudaParity, DecodeStepsOverCache) {
  AMOR_REQUIRE_GPU();
  const int64_t B = 3, C = 24, H = 4, Hkv = 2, D = 64;
  uint64_t seed = 9600;
  for (DType dt : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor kc = input({B, C, Hkv, D}, ++seed, dt), vc = input({B, C, Hkv, D}, ++seed, dt);
    Tensor lengths = Tensor::from_vector<int32_t>({B}, {3, 10, 1});
    const int64_t per = C * Hkv * D;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = int64_t(lengths.data<int32_t>()[b]) * Hkv * D; e < per; ++e)
        kc.data<float>()[b * per + e] = vc.data<float>()[b * per + e] = NAN;
    Tensor gk = up(kc, dt), gv = up(vc, dt), glen = lengths.to(Device::CUDA);
    for (int step = 0; step < 5; ++step) {
      const std::string op = "decode step " + std::to_string(step) + " over a cache";
      Tensor q = input({B, 1, H, D}, ++seed, dt), k = input({B, 1, Hkv, D}, ++seed, dt);
      Tensor v = input({B, 1, Hkv, D}, ++seed, dt);
      // The cpu: its references on the host lengths (f32 throughout).
      Tensor rq = rope_forward_lengths(q, lengths), rk = rope_forward_lengths(k, lengths);
      kv_append_step(kc, vc, rk, v, lengths);
      const Tensor want = attention_forward_cache(rq, kc, vc, lengths).o;
      // The GPU: nothing read back between the ops.
      Tensor gq = rope_forward_lengths(up(q, dt), glen);
      kv_append_step(gk, gv, rope_forward_lengths(up(k, dt), glen), up(v, dt), glen);
      poison({{{B, 1, H, D}, dt}});
      const Tensor got = attention_forward_cache(gq, gk, gv, glen).o;
      expect_close(op, "o", got, want, out_tol(dt));
      EXPECT_EQ(glen.to(Device::CPU).to_vector<int32_t>(), lengths.to_vector<int32_t>()) << op;
    }
  }
}

}  // namespace
}  // namespace amor::parity
