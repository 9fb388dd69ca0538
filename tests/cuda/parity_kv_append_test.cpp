// CUDA == cpu reference for kv_append_step (a decode token written at each sequence's device-side
// length, which then advances; kernels/kv_append/kv_append.h): exact, f32 and bf16, the 16-byte
// path and the scalar one (a row of 3 x 5 elements), two steps in a row (the second reads the
// lengths the first advanced on the device), and a full sequence left as it was on the GPU.
#include "kernels/kv_append/kv_append.h"
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

}  // namespace
}  // namespace amor::parity
