// CUDA == cpu reference for kv_append_step (a decode token written at each sequence's device-side
// length, which then advances; kernels/kv_append/kv_append.h): exact, f32 and bf16, the 16-byte
// path and the scalar one (a row of 3 x 5 elements), two steps in a row (the second reads the
// lengths the first advanced on the device), and a full sequence left as it was on the GPU. Then
// decode steps of one attention over a KV cache with its lengths on the device, as KvCache's step
// path runs them (models/infer/kv_cache.h): RoPE at the device lengths, the append that advances
// them, the attention of every sequence in one launch at the advanced lengths. Then
// kv_rope_append_step, those RoPEs and the append fused into one launch over one projection's
// output: against the cpu reference and bit for bit against the GPU's unfused ops.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

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

// One projection's output, [B, 1, (Hq + 2 Hkv) D] (f32 cpu): per sequence Q's heads, K's, V's.
Tensor pack_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t B = q.size(0), nq = q.numel() / B, nk = k.numel() / B, w = nq + 2 * nk;
  Tensor qkv = Tensor::empty({B, 1, w}, DType::F32);
  float* o = qkv.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(o + b * w, q.data<float>() + b * nq, sizeof(float) * size_t(nq));
    std::memcpy(o + b * w + nq, k.data<float>() + b * nk, sizeof(float) * size_t(nk));
    std::memcpy(o + b * w + nq + nk, v.data<float>() + b * nk, sizeof(float) * size_t(nk));
  }
  return qkv;
}

// A cache [B, C, Hkv, D] (f32 cpu) split into the given rows (sequence, row), [n, Hkv D], and a
// copy of the cache with those rows zeroed.
std::pair<Tensor, Tensor> split_rows(const Tensor& cache,
                                     const std::vector<std::pair<int64_t, int64_t>>& which) {
  const int64_t C = cache.size(1), row = cache.size(2) * cache.size(3);
  Tensor rows = Tensor::empty({int64_t(which.size()), row}, DType::F32), rest = cache.clone();
  for (size_t n = 0; n < which.size(); ++n) {
    float* r = rest.data<float>() + (which[n].first * C + which[n].second) * row;
    std::memcpy(rows.data<float>() + int64_t(n) * row, r, sizeof(float) * size_t(row));
    std::memset(r, 0, sizeof(float) * size_t(row));
  }
  return {rows, rest};
}

struct RopeAppendCase {
  int64_t B, C, Hq, Hkv, D;
  std::vector<int32_t> lengths;
};

// kv_rope_append_step on the GPU, two steps in a row (the second at the lengths the first advanced
// on the device): Q and the K rows written so far against the cpu reference at RoPE's tolerance
// (rope's parity: out_tol), V, the untouched K rows and the lengths exactly; and everything bit for
// bit equal to the GPU's own rope_forward_lengths(q), rope_forward_lengths(k) and kv_append_step.
// The 16-byte path (D 64) and the scalar one (D 6), one sequence and five, GQA and Hq == Hkv, a
// sequence full from the start and one that fills at the first step (the GPU leaves them as they
// were; the cpu reference runs on the others alone), positions 0 and 16383.
TEST(CudaParity, KvRopeAppendStep) {
  AMOR_REQUIRE_GPU();
  const RopeAppendCase cases[] = {{1, 8, 4, 2, 64, {5}},
                                  {5, 6, 4, 2, 64, {0, 3, 6, 5, 1}},
                                  {5, 6, 3, 3, 6, {2, 6, 0, 5, 4}},
                                  {1, 5, 2, 1, 6, {0}},
                                  {2, 16390, 4, 1, 64, {16383, 7}}};
  uint64_t seed = 9700;
  for (const RopeAppendCase& c : cases) {
    const int64_t B = c.B, C = c.C, Hq = c.Hq, Hkv = c.Hkv, D = c.D, W = (Hq + 2 * Hkv) * D;
    const int64_t per = C * Hkv * D;
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " B " + std::to_string(B) + " D " +
                   std::to_string(D));
      const Shape cache{B, C, Hkv, D};
      Tensor kc = input(cache, ++seed, dt), vc = input(cache, ++seed, dt);
      Tensor gk = up(kc, dt), gv = up(vc, dt), ck = up(kc, dt), cv = up(vc, dt);
      Tensor lengths = Tensor::from_vector<int32_t>({B}, c.lengths);
      Tensor glen = lengths.to(Device::CUDA), clen = lengths.to(Device::CUDA);
      std::vector<std::pair<int64_t, int64_t>> written;  // (sequence, row) of every K row written
      for (int step = 0; step < 2; ++step) {
        const std::string op = "kv_rope_append_step " + std::to_string(step);
        Tensor q = input({B, 1, Hq, D}, ++seed, dt), k = input({B, 1, Hkv, D}, ++seed, dt);
        Tensor v = input({B, 1, Hkv, D}, ++seed, dt);
        const Tensor qkv = pack_qkv(q, k, v);
        const std::vector<int32_t> at = lengths.to_vector<int32_t>();
        // The cpu (f32): Q of every sequence at its length (a full one's too, as on the GPU), and
        // the fused op on each sequence with room, through one-sequence views of the caches.
        const Tensor want_q = rope_forward_lengths(q, lengths);
        for (int64_t b = 0; b < B; ++b) {
          if (at[size_t(b)] >= C) continue;
          written.emplace_back(b, at[size_t(b)]);
          Tensor lb = Tensor::from_vector<int32_t>({1}, {at[size_t(b)]});
          kv_rope_append_step(qkv.slice_flat(b * W, {1, 1, W}), Hq,
                              kc.slice_flat(b * per, {1, C, Hkv, D}),
                              vc.slice_flat(b * per, {1, C, Hkv, D}), lb, 10000.0);
          lengths.data<int32_t>()[b] = lb.data<int32_t>()[0];
        }
        // The GPU: fused, and the three ops it fuses.
        poison({{{B, 1, Hq, D}, dt}});
        const Tensor got_q = kv_rope_append_step(up(qkv, dt), Hq, gk, gv, glen, 10000.0);
        const Tensor comp_q = rope_forward_lengths(up(q, dt), clen);
        kv_append_step(ck, cv, rope_forward_lengths(up(k, dt), clen), up(v, dt), clen);

        expect_close(op, "q", got_q, want_q, out_tol(dt));
        const auto [got_rows, got_rest] = split_rows(down(gk), written);
        const auto [want_rows, want_rest] = split_rows(kc, written);
        expect_close(op, "written k rows", got_rows, want_rows, out_tol(dt));
        expect_equal(op, "k_cache's other rows", got_rest, want_rest);
        expect_equal(op, "v_cache", gv, vc);
        const std::vector<int32_t> got_len = glen.to(Device::CPU).to_vector<int32_t>();
        EXPECT_EQ(got_len, lengths.to_vector<int32_t>()) << op;
        for (int64_t b = 0; b < B; ++b)
          EXPECT_EQ(got_len[size_t(b)], at[size_t(b)] < C ? at[size_t(b)] + 1 : at[size_t(b)])
              << op;

        expect_equal(op + " == unfused", "q", got_q, down(comp_q));
        expect_equal(op + " == unfused", "k_cache", gk, down(ck));
        expect_equal(op + " == unfused", "v_cache", gv, down(cv));
        EXPECT_EQ(clen.to(Device::CPU).to_vector<int32_t>(), got_len) << op;
      }
    }
  }
  // The cuda path's own checks: storage dtypes and devices.
  const int64_t B = 2, C = 3, Hq = 2, Hkv = 1, D = 4;
  Tensor kc = up(input({B, C, Hkv, D}, 1, DType::F32), DType::F32);
  Tensor qkv = up(input({B, 1, (Hq + 2 * Hkv) * D}, 2, DType::F32), DType::F32);
  Tensor len = Tensor::from_vector<int32_t>({B}, {0, 1});
  EXPECT_EQ(
      error_of([&] { kv_rope_append_step(qkv, Hq, kc, kc, len, 10000.0); }),
      "kv_rope_append_step: i32[2]@cpu and k_cache f32[2,3,1,4]@cuda are on different devices");
  EXPECT_EQ(error_of([&] {
              kv_rope_append_step(qkv.to(Device::CPU), Hq, kc, kc, len.to(Device::CUDA), 10000.0);
            }),
            "kv_rope_append_step: f32[2,1,16]@cpu and k_cache f32[2,3,1,4]@cuda are on different "
            "devices");
  Tensor k64 = up(input({B, C, Hkv, D}, 3, DType::F32), DType::F64);
  Tensor qkv64 = up(input({B, 1, (Hq + 2 * Hkv) * D}, 4, DType::F32), DType::F64);
  EXPECT_EQ(
      error_of([&] { kv_rope_append_step(qkv64, Hq, k64, k64, len.to(Device::CUDA), 10000.0); }),
      "kv_rope_append_step: argument 'k_cache' is f64[2,3,1,4]@cuda; on cuda this op takes f32 or "
      "bf16");
}

}  // namespace
}  // namespace amor::parity
