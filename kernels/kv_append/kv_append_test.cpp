#include "kernels/kv_append/kv_append.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/rope/rope.h"
#include "tests/common/error_of.h"
#include "tests/common/random.h"

namespace amor {
namespace {

// Each sequence's token lands in row lengths[b] of its own storage, which then advances; the
// other rows are untouched. Any dtype on the cpu.
TEST(KvAppend, WritesRowLengthAndAdvancesIt) {
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t B = 3, C = 5, H = 2, D = 4;
    Tensor kc = testing::randn({B, C, H, D}, 1).to(dt), vc = testing::randn({B, C, H, D}, 2).to(dt);
    const Tensor k0 = kc.clone(), v0 = vc.clone();
    Tensor k = testing::randn({B, 1, H, D}, 3).to(dt), v = testing::randn({B, 1, H, D}, 4).to(dt);
    Tensor lengths = Tensor::from_vector<int32_t>({B}, {0, 4, 2});
    kv_append_step(kc, vc, k, v, lengths);
    EXPECT_EQ(lengths.to_vector<int32_t>(), (std::vector<int32_t>{1, 5, 3}));
    const int64_t row = H * D;
    const std::vector<int32_t> at = {0, 4, 2};
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < C; ++r)
        for (int64_t e = 0; e < row; ++e) {
          const int64_t i = (b * C + r) * row + e;
          const double wk = r == at[size_t(b)] ? k.item(b * row + e) : k0.item(i);
          const double wv = r == at[size_t(b)] ? v.item(b * row + e) : v0.item(i);
          EXPECT_EQ(kc.item(i), wk) << b << " " << r << " " << e;
          EXPECT_EQ(vc.item(i), wv) << b << " " << r << " " << e;
        }
  }
}

// A full sequence is refused before anything is written; shapes, dtypes and devices are checked.
TEST(KvAppend, RefusesAFullSequenceAndBadArguments) {
  const int64_t B = 2, C = 3, H = 1, D = 2;
  Tensor kc = Tensor::zeros({B, C, H, D}, DType::F32), vc = Tensor::zeros({B, C, H, D}, DType::F32);
  Tensor k = Tensor::full<float>({B, 1, H, D}, 1.0f), v = Tensor::full<float>({B, 1, H, D}, 2.0f);
  Tensor lengths = Tensor::from_vector<int32_t>({B}, {1, 3});
  try {
    kv_append_step(kc, vc, k, v, lengths);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 holds 3 of the cache's 3 rows"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(lengths.to_vector<int32_t>(), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(kc.item(2), 0.0);
  Tensor ok = Tensor::from_vector<int32_t>({B}, {0, 0});
  EXPECT_THROW(kv_append_step(kc, vc, Tensor::zeros({B, 2, H, D}, DType::F32), v, ok), Error);
  EXPECT_THROW(kv_append_step(kc, vc, k.to(DType::F64), v, ok), Error);
  EXPECT_THROW(kv_append_step(kc, vc, k, v, Tensor::zeros({B}, DType::I64)), Error);
  EXPECT_THROW(kv_append_step(kc, Tensor::zeros({B, C + 1, H, D}, DType::F32), k, v, ok), Error);
  EXPECT_THROW(kv_append_step(kc, vc, k, v, Tensor::from_vector<int32_t>({B}, {0, -1})), Error);
}

// ---- kv_rope_append_step: the decode step's RoPE of Q and K fused with the append.

// One projection's output as the op reads it, [B, 1, (Hq + 2 Hkv) D]: per sequence Q's heads, then
// K's, then V's (element by element, not the op's own split).
Tensor pack_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t B = q.size(0), nq = q.numel() / B, nk = k.numel() / B;
  Tensor qkv = Tensor::empty({B, 1, nq + 2 * nk}, q.dtype());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t o = b * (nq + 2 * nk);
    for (int64_t e = 0; e < nq; ++e) qkv.set_item(o + e, q.item(b * nq + e));
    for (int64_t e = 0; e < nk; ++e) qkv.set_item(o + nq + e, k.item(b * nk + e));
    for (int64_t e = 0; e < nk; ++e) qkv.set_item(o + nq + nk + e, v.item(b * nk + e));
  }
  return qkv;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The composition the op fuses, on the cpu: rope's reference takes f32 and f64, so a bf16 tensor
// is rotated as f32 and rounded back (kv_append.h).
Tensor rope_at_lengths(const Tensor& x, const Tensor& lengths, double base) {
  if (x.dtype() == DType::F32 || x.dtype() == DType::F64)
    return rope_forward_lengths(x, lengths, base);
  return rope_forward_lengths(x.to(DType::F32), lengths, base).to(x.dtype());
}

struct FusedCase {
  int64_t B, C, Hq, Hkv, D;
  std::vector<int32_t> lengths;
  double base;
};

// Bit for bit rope_forward_lengths(q), rope_forward_lengths(k) and kv_append_step(k_rot, v): the
// returned Q, both caches (written rows and the rest) and the advanced lengths, over two steps
// (the second at the lengths the first advanced). One sequence and three at different lengths,
// GQA (Hq = 2 Hkv, 3 Hkv) and Hq == Hkv, head dims 8 and 64, another base.
TEST(KvRopeAppend, EqualsTheCompositionBitwise) {
  const FusedCase cases[] = {{1, 5, 4, 2, 8, {3}, 10000.0},
                             {3, 7, 4, 2, 64, {0, 5, 2}, 10000.0},
                             {3, 9, 3, 3, 8, {6, 0, 4}, 10000.0},
                             {3, 6, 6, 2, 64, {1, 4, 0}, 500000.0},
                             {1, 4, 2, 2, 64, {0}, 10000.0}};
  uint64_t seed = 100;
  for (const FusedCase& c : cases) {
    for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " B " + std::to_string(c.B) + " Hq " +
                   std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) + " D " +
                   std::to_string(c.D));
      Tensor kc = testing::randn({c.B, c.C, c.Hkv, c.D}, ++seed).to(dt);
      Tensor vc = testing::randn({c.B, c.C, c.Hkv, c.D}, ++seed).to(dt);
      Tensor want_k = kc.clone(), want_v = vc.clone();
      Tensor lengths = Tensor::from_vector<int32_t>({c.B}, c.lengths), want_len = lengths.clone();
      for (int step = 0; step < 2; ++step) {
        Tensor q = testing::randn({c.B, 1, c.Hq, c.D}, ++seed).to(dt);
        Tensor k = testing::randn({c.B, 1, c.Hkv, c.D}, ++seed).to(dt);
        Tensor v = testing::randn({c.B, 1, c.Hkv, c.D}, ++seed).to(dt);
        const Tensor got_q = kv_rope_append_step(pack_qkv(q, k, v), c.Hq, kc, vc, lengths, c.base);
        const Tensor want_q = rope_at_lengths(q, want_len, c.base);
        kv_append_step(want_k, want_v, rope_at_lengths(k, want_len, c.base), v, want_len);
        EXPECT_TRUE(same_bits(got_q, want_q)) << "q, step " << step;
        EXPECT_EQ(got_q.shape(), (Shape{c.B, 1, c.Hq, c.D}));
        EXPECT_TRUE(same_bits(kc, want_k)) << "k_cache, step " << step;
        EXPECT_TRUE(same_bits(vc, want_v)) << "v_cache, step " << step;
        std::vector<int32_t> advanced = c.lengths;
        for (int32_t& l : advanced) l += step + 1;
        EXPECT_EQ(lengths.to_vector<int32_t>(), advanced) << "step " << step;
        EXPECT_EQ(want_len.to_vector<int32_t>(), advanced) << "step " << step;
      }
    }
  }
}

// Worked by hand. Sequence 0 at position 0: every angle is 0, the rotation the identity, so Q
// comes back as given and the cache rows are K and V exactly, in every dtype. Sequence 1 at
// position 1 with D = 4: angles 1 and base^(-1/2) = 0.01; Q heads (1, 1, 0, 0) turn to
// (cos 1, cos .01, sin 1, sin .01) and K (0, 0, 1, 1) to (-sin 1, -sin .01, cos 1, cos .01).
TEST(KvRopeAppend, HandCheckedPositionsZeroAndOne) {
  const int64_t B = 2, C = 3, Hq = 2, Hkv = 1, D = 4, row = Hkv * D;
  for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor q = testing::randn({B, 1, Hq, D}, 7).to(dt),
           k = testing::randn({B, 1, Hkv, D}, 8).to(dt);
    Tensor v = testing::randn({B, 1, Hkv, D}, 9).to(dt);
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t e = 0; e < D; ++e) q.set_item((Hq + h) * D + e, e < 2 ? 1.0 : 0.0);
    for (int64_t e = 0; e < D; ++e) k.set_item(row + e, e < 2 ? 0.0 : 1.0);
    Tensor kc = Tensor::zeros({B, C, Hkv, D}, dt), vc = Tensor::zeros({B, C, Hkv, D}, dt);
    Tensor lengths = Tensor::from_vector<int32_t>({B}, {0, 1});
    const Tensor out = kv_rope_append_step(pack_qkv(q, k, v), Hq, kc, vc, lengths, 10000.0);
    EXPECT_EQ(lengths.to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
    for (int64_t e = 0; e < Hq * D; ++e) EXPECT_EQ(out.item(e), q.item(e)) << e;
    for (int64_t e = 0; e < row; ++e) {
      EXPECT_EQ(kc.item(e), k.item(e)) << e;  // sequence 0, row 0
      EXPECT_EQ(vc.item(e), v.item(e)) << e;
      EXPECT_EQ(vc.item((C + 1) * row + e), v.item(row + e)) << e;  // sequence 1, row 1
    }
    const double tol = dt == DType::F64 ? 1e-15 : dt == DType::F32 ? 1e-7 : 4e-3;
    const double want_q[] = {std::cos(1.0), std::cos(0.01), std::sin(1.0), std::sin(0.01)};
    const double want_k[] = {-std::sin(1.0), -std::sin(0.01), std::cos(1.0), std::cos(0.01)};
    for (int64_t e = 0; e < D; ++e) {
      for (int64_t h = 0; h < Hq; ++h) EXPECT_NEAR(out.item((Hq + h) * D + e), want_q[e], tol) << e;
      EXPECT_NEAR(kc.item((C + 1) * row + e), want_k[e], tol) << e;
    }
    // Rows nobody wrote stay zero.
    for (int64_t r : {1, 2, 3, 5})
      for (int64_t e = 0; e < row; ++e) {
        EXPECT_EQ(kc.item(r * row + e), 0.0) << r;
        EXPECT_EQ(vc.item(r * row + e), 0.0) << r;
      }
  }
}

// Every sequence is checked before anything is written: a full sequence (or a negative length)
// after one with room leaves both caches and all lengths as they were.
TEST(KvRopeAppend, NoRoomWritesNothing) {
  const int64_t B = 3, C = 4, Hq = 2, Hkv = 1, D = 8;
  Tensor kc = testing::randn({B, C, Hkv, D}, 1).to(DType::F32);
  Tensor vc = testing::randn({B, C, Hkv, D}, 2).to(DType::F32);
  const Tensor k0 = kc.clone(), v0 = vc.clone();
  const Tensor qkv = testing::randn({B, 1, (Hq + 2 * Hkv) * D}, 3).to(DType::F32);
  struct Bad {
    std::vector<int32_t> lengths;
    std::string message;
  };
  const Bad bad[] = {
      {{0, 2, 4},
       "kv_rope_append_step: sequence 2 holds 4 of the cache's 4 rows: no room for another token"},
      {{1, 5, 0},
       "kv_rope_append_step: sequence 1 holds 5 of the cache's 4 rows: no room for another token"},
      {{3, -1, 0}, "kv_rope_append_step: length -1 of sequence 1 is negative"}};
  for (const Bad& c : bad) {
    Tensor lengths = Tensor::from_vector<int32_t>({B}, c.lengths);
    EXPECT_EQ(testing::error_of([&] { kv_rope_append_step(qkv, Hq, kc, vc, lengths, 10000.0); }),
              c.message);
    EXPECT_EQ(lengths.to_vector<int32_t>(), c.lengths);
    EXPECT_TRUE(same_bits(kc, k0));
    EXPECT_TRUE(same_bits(vc, v0));
  }
}

// Each argument check names the op and the argument.
TEST(KvRopeAppend, RefusesBadArgumentsNamingThem) {
  const int64_t B = 2, C = 3, Hq = 2, Hkv = 1, D = 4, W = (Hq + 2 * Hkv) * D;
  const DType f32 = DType::F32;
  Tensor kc = Tensor::zeros({B, C, Hkv, D}, f32), vc = Tensor::zeros({B, C, Hkv, D}, f32);
  Tensor qkv = Tensor::full<float>({B, 1, W}, 1.0f);
  Tensor len = Tensor::from_vector<int32_t>({B}, {0, 1});
  auto err = [&](const Tensor& x, int64_t hq, const Tensor& k, const Tensor& v, const Tensor& l,
                 double base = 10000.0) {
    return testing::error_of([&] { kv_rope_append_step(x, hq, k, v, l, base); });
  };
  const std::string op = "kv_rope_append_step: ";
  EXPECT_EQ(err(Tensor(), Hq, kc, vc, len), op + "argument 'qkv' is undefined");
  EXPECT_EQ(err(qkv.view({B, W}), Hq, kc, vc, len),
            op + "argument 'qkv' is f32[2,16]@cpu, expected 3 dimensions");
  EXPECT_EQ(err(qkv, Hq, kc.view({B, C, D}), vc, len),
            op + "argument 'k_cache' is f32[2,3,4]@cpu, expected 4 dimensions");
  Tensor odd = Tensor::zeros({B, C, 1, 3}, f32);
  EXPECT_EQ(
      err(Tensor::zeros({B, 1, 12}, f32), 2, odd, odd, len),
      op + "argument 'k_cache' is f32[2,3,1,3]@cpu, expected [B,C,Hkv,D] with an even head dim D");
  EXPECT_EQ(err(qkv, 0, kc, vc, len), op + "q_heads must be >= 1, got 0");
  EXPECT_EQ(err(qkv, -2, kc, vc, len), op + "q_heads must be >= 1, got -2");
  EXPECT_EQ(err(qkv, Hq, kc, vc, len, 0.0), op + "base must be finite and > 0, got 0");
  EXPECT_EQ(err(qkv, Hq, kc, vc, len, NAN), op + "base must be finite and > 0, got nan");
  EXPECT_EQ(err(qkv, Hq, kc, Tensor::zeros({B, C + 1, Hkv, D}, f32), len),
            op + "argument 'v_cache' is f32[2,4,1,4]@cpu, expected shape [2,3,1,4]");
  EXPECT_EQ(err(Tensor::zeros({B + 1, 1, W}, f32), Hq, kc, vc, len),
            op + "argument 'qkv' is f32[3,1,16]@cpu, expected shape [2,1,*]");
  EXPECT_EQ(err(Tensor::zeros({B, 2, W}, f32), Hq, kc, vc, len),
            op + "argument 'qkv' is f32[2,2,16]@cpu, expected shape [2,1,*]");
  EXPECT_EQ(err(Tensor::zeros({B, 1, W - D}, f32), Hq, kc, vc, len),
            op + "argument 'qkv' is f32[2,1,12]@cpu, expected its last dim (q_heads + 2 Hkv) D = "
                 "(2 + 2*1)*4 = 16");
  EXPECT_EQ(err(qkv, 3, kc, vc, len),
            op + "argument 'qkv' is f32[2,1,16]@cpu, expected its last dim (q_heads + 2 Hkv) D = "
                 "(3 + 2*1)*4 = 20");
  EXPECT_EQ(err(qkv, Hq, kc, vc, Tensor::zeros({B}, DType::I64)),
            op + "argument 'lengths' is i64[2]@cpu, expected dtype i32");
  EXPECT_EQ(err(qkv, Hq, kc, vc, Tensor::zeros({B + 1}, DType::I32)),
            op + "argument 'lengths' is i32[3]@cpu, expected shape [2]");
  EXPECT_EQ(err(qkv.to(DType::F64), Hq, kc, vc, len),
            op + "f64[2,1,16]@cpu and k_cache f32[2,3,1,4]@cpu differ in dtype");
  EXPECT_EQ(err(qkv, Hq, kc, vc.to(DType::BF16), len),
            op + "bf16[2,3,1,4]@cpu and k_cache f32[2,3,1,4]@cpu differ in dtype");
  EXPECT_EQ(err(qkv.to(DType::I32), Hq, kc.to(DType::I32), vc.to(DType::I32), len),
            op + "argument 'qkv' is i32[2,1,16]@cpu, expected a floating dtype (RoPE rotates it)");
  // Nothing above wrote anything.
  EXPECT_EQ(len.to_vector<int32_t>(), (std::vector<int32_t>{0, 1}));
  for (int64_t i = 0; i < kc.numel(); ++i) ASSERT_EQ(kc.item(i), 0.0);
}

}  // namespace
}  // namespace amor
