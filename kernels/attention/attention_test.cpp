#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernels/attention/attention.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::max_abs_diff;
using testing::randn;

// A gate with both kinds of rows: Bernoulli(0.6), with row (0,0) forced off and (0,1) forced on.
Tensor mixed_gate(int64_t B, int64_t Tq, uint64_t seed) {
  Tensor g = testing::bernoulli({B, Tq}, seed, 0.6);
  g.data<uint8_t>()[0] = 0;
  if (Tq > 1) g.data<uint8_t>()[1] = 1;
  return g;
}

// Rows [b, i] of a [B,T,...] tensor, as a flat copy of the elements of that row.
Tensor row(const Tensor& t, int64_t b, int64_t i) {
  int64_t per = t.numel() / (t.size(0) * t.size(1));
  return t.slice_flat((b * t.size(1) + i) * per, {per});
}

// The [B,H,T] lse entry of row (b, i), head h, as a 1-element view.
Tensor lse_at(const Tensor& lse, int64_t b, int64_t h, int64_t i) {
  return lse.slice_flat((b * lse.size(1) + h) * lse.size(2) + i, {1});
}

// Copy of t with rows [b, i] zeroed where gate[b, i] == 0.
Tensor zero_gated_rows(const Tensor& t, const Tensor& gate) {
  Tensor out = t.clone();
  for (int64_t b = 0; b < t.size(0); ++b)
    for (int64_t i = 0; i < t.size(1); ++i)
      if (gate.data<uint8_t>()[b * t.size(1) + i] == 0) row(out, b, i).zero_();
  return out;
}

struct Config {
  int64_t B, Tq, Tk, H, Hkv, D;
  bool gated;
  std::optional<double> scale;
};

void check_grads(const Config& c, uint64_t seed) {
  SCOPED_TRACE("Tq=" + std::to_string(c.Tq) + " Tk=" + std::to_string(c.Tk) +
               " H=" + std::to_string(c.H) + " Hkv=" + std::to_string(c.Hkv) +
               " gated=" + std::to_string(c.gated));
  Tensor q = randn({c.B, c.Tq, c.H, c.D}, seed), k = randn({c.B, c.Tk, c.Hkv, c.D}, seed + 1);
  Tensor v = randn({c.B, c.Tk, c.Hkv, c.D}, seed + 2), dout = randn(q.shape(), seed + 3);
  Tensor gate = c.gated ? mixed_gate(c.B, c.Tq, seed + 4) : Tensor();
  AttentionOutput f = attention_forward(q, k, v, gate, c.scale);
  AttentionGrads g = attention_backward(q, k, v, gate, f.o, f.lse, dout, c.scale);
  gradcheck([&] { return std::vector<Tensor>{attention_forward(q, k, v, gate, c.scale).o}; },
            {dout}, {{"q", q, g.dq}, {"k", k, g.dk}, {"v", v, g.dv}});
}

TEST(Attention, GradcheckDouble) {
  const Config configs[] = {
      {2, 5, 5, 4, 2, 3, false, std::nullopt},  // causal, GQA
      {2, 5, 5, 4, 2, 3, true, std::nullopt},   // causal, GQA, gated
      {2, 3, 7, 4, 2, 5, true, std::nullopt},   // Tq < Tk, GQA, gated
      {1, 4, 6, 3, 3, 5, false, 0.37},          // Tq < Tk, MHA, explicit scale
      {2, 1, 6, 4, 1, 3, true, std::nullopt},   // one decode step, MQA, gated
  };
  uint64_t seed = 10;
  for (const Config& c : configs) check_grads(c, seed += 10);
}

// Gated-off rows are exactly zero (o, lse = 0, dq), and they are never read: NaN in their q and
// dout leaves every output and gradient finite and the firing rows unchanged.
TEST(Attention, GatedOffRowsAreZeroAndNeverRead) {
  const int64_t B = 2, Tq = 6, Tk = 6, H = 4, Hkv = 2, D = 3;
  Tensor q = randn({B, Tq, H, D}, 1), k = randn({B, Tk, Hkv, D}, 2), v = randn({B, Tk, Hkv, D}, 3);
  Tensor dout = randn(q.shape(), 4), gate = mixed_gate(B, Tq, 5);
  AttentionOutput clean = attention_forward(q, k, v, gate);
  AttentionGrads clean_g = attention_backward(q, k, v, gate, clean.o, clean.lse, dout);
  Tensor qn = q.clone(), dn = dout.clone();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i)
      if (gate.data<uint8_t>()[b * Tq + i] == 0)
        for (int64_t e = 0; e < H * D; ++e) {
          row(qn, b, i).set_item(e, std::numeric_limits<double>::quiet_NaN());
          row(dn, b, i).set_item(e, std::numeric_limits<double>::quiet_NaN());
        }
  AttentionOutput f = attention_forward(qn, k, v, gate);
  AttentionGrads g = attention_backward(qn, k, v, gate, f.o, f.lse, dn);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i) {
      if (gate.data<uint8_t>()[b * Tq + i] != 0) continue;
      for (int64_t e = 0; e < H * D; ++e) {
        EXPECT_EQ(row(f.o, b, i).item(e), 0.0);
        EXPECT_EQ(row(g.dq, b, i).item(e), 0.0);
      }
      for (int64_t h = 0; h < H; ++h) EXPECT_EQ(lse_at(f.lse, b, h, i).item(), 0.0);
    }
  EXPECT_EQ(max_abs_diff(f.o, clean.o), 0.0);
  EXPECT_EQ(max_abs_diff(f.lse, clean.lse), 0.0);
  EXPECT_EQ(max_abs_diff(g.dq, clean_g.dq), 0.0);
  EXPECT_EQ(max_abs_diff(g.dk, clean_g.dk), 0.0);
  EXPECT_EQ(max_abs_diff(g.dv, clean_g.dv), 0.0);
}

// Firing rows are bitwise the dense attention's rows, forward and dq; dk, dv equal the dense
// ones computed with dout zeroed at the gated-off rows (K, V get gradient only through firing rows).
TEST(Attention, GatedEqualsDenseAtFiringRows) {
  const int64_t B = 2, Tq = 5, Tk = 8, H = 4, Hkv = 2, D = 6;
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor q = randn({B, Tq, H, D}, 11, dt), k = randn({B, Tk, Hkv, D}, 12, dt);
    Tensor v = randn({B, Tk, Hkv, D}, 13, dt), dout = randn(q.shape(), 14, dt);
    Tensor gate = mixed_gate(B, Tq, 15);
    AttentionOutput gated = attention_forward(q, k, v, gate);
    AttentionOutput dense = attention_forward(q, k, v);
    AttentionGrads gg = attention_backward(q, k, v, gate, gated.o, gated.lse, dout);
    Tensor dout_masked = zero_gated_rows(dout, gate);
    AttentionGrads gd = attention_backward(q, k, v, Tensor(), dense.o, dense.lse, dout_masked);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tq; ++i) {
        if (gate.data<uint8_t>()[b * Tq + i] == 0) continue;
        EXPECT_EQ(max_abs_diff(row(gated.o, b, i), row(dense.o, b, i)), 0.0);
        EXPECT_EQ(max_abs_diff(row(gg.dq, b, i), row(gd.dq, b, i)), 0.0);
        for (int64_t h = 0; h < H; ++h)
          EXPECT_EQ(lse_at(gated.lse, b, h, i).item(), lse_at(dense.lse, b, h, i).item());
      }
    EXPECT_EQ(max_abs_diff(gg.dk, gd.dk), 0.0);
    EXPECT_EQ(max_abs_diff(gg.dv, gd.dv), 0.0);
    EXPECT_GT(testing::rel_rms(gg.dk, Tensor::zeros(gg.dk.shape(), dt)), 0.0);
  }
}

// Tq queries against a Tk cache equal the last Tq rows of full causal attention (Tq = 1: decode).
TEST(Attention, SuffixQueriesEqualLastRowsOfFullForward) {
  const int64_t B = 2, Tk = 7, H = 4, Hkv = 2, D = 5;
  Tensor q = randn({B, Tk, H, D}, 21), k = randn({B, Tk, Hkv, D}, 22), v = randn({B, Tk, Hkv, D}, 23);
  AttentionOutput full = attention_forward(q, k, v);
  for (int64_t Tq : {1, 3}) {
    Tensor qs = Tensor::empty({B, Tq, H, D}, DType::F64);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tq; ++i) row(qs, b, i).copy_from(row(q, b, Tk - Tq + i));
    AttentionOutput part = attention_forward(qs, k, v);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tq; ++i) {
        EXPECT_EQ(max_abs_diff(row(part.o, b, i), row(full.o, b, Tk - Tq + i)), 0.0);
        for (int64_t h = 0; h < H; ++h)
          EXPECT_EQ(lse_at(part.lse, b, h, i).item(), lse_at(full.lse, b, h, Tk - Tq + i).item());
      }
  }
}

// A fact that needs no oracle: the first causal row sees only key 0, so o = v there and lse is
// that one score.
TEST(Attention, FirstRowCopiesFirstValue) {
  const int64_t B = 2, T = 4, H = 2, D = 3;
  Tensor q = randn({B, T, H, D}, 31), k = randn({B, T, H, D}, 32), v = randn({B, T, H, D}, 33);
  AttentionOutput f = attention_forward(q, k, v, Tensor(), 0.5);
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_EQ(max_abs_diff(row(f.o, b, 0), row(v, b, 0)), 0.0);
    for (int64_t h = 0; h < H; ++h) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d)
        dot += row(q, b, 0).item(h * D + d) * row(k, b, 0).item(h * D + d);
      EXPECT_NEAR(lse_at(f.lse, b, h, 0).item(), 0.5 * dot, 1e-14);
    }
  }
}

// GQA is MHA with each kv head repeated for its G = H/Hkv query heads (query head h reads kv
// head h / G); the gradient of a shared kv head is the sum over its repeats.
TEST(Attention, GqaEqualsMhaWithRepeatedKvHeads) {
  const int64_t B = 2, Tq = 4, Tk = 6, H = 6, Hkv = 2, D = 3, G = H / Hkv;
  Tensor q = randn({B, Tq, H, D}, 51), k = randn({B, Tk, Hkv, D}, 52), v = randn({B, Tk, Hkv, D}, 53);
  Tensor dout = randn(q.shape(), 54), gate = mixed_gate(B, Tq, 55);
  Tensor kr = Tensor::empty({B, Tk, H, D}, DType::F64), vr = Tensor::empty({B, Tk, H, D}, DType::F64);
  for (int64_t bt = 0; bt < B * Tk; ++bt)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        kr.set_item((bt * H + h) * D + d, k.item((bt * Hkv + h / G) * D + d));
        vr.set_item((bt * H + h) * D + d, v.item((bt * Hkv + h / G) * D + d));
      }
  AttentionOutput gqa = attention_forward(q, k, v, gate), mha = attention_forward(q, kr, vr, gate);
  EXPECT_EQ(max_abs_diff(gqa.o, mha.o), 0.0);
  EXPECT_EQ(max_abs_diff(gqa.lse, mha.lse), 0.0);
  AttentionGrads gg = attention_backward(q, k, v, gate, gqa.o, gqa.lse, dout);
  AttentionGrads gm = attention_backward(q, kr, vr, gate, mha.o, mha.lse, dout);
  EXPECT_EQ(max_abs_diff(gg.dq, gm.dq), 0.0);
  Tensor dk_sum = Tensor::zeros(k.shape(), DType::F64), dv_sum = Tensor::zeros(v.shape(), DType::F64);
  for (int64_t bt = 0; bt < B * Tk; ++bt)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        int64_t to = (bt * Hkv + h / G) * D + d, from = (bt * H + h) * D + d;
        dk_sum.set_item(to, dk_sum.item(to) + gm.dk.item(from));
        dv_sum.set_item(to, dv_sum.item(to) + gm.dv.item(from));
      }
  EXPECT_LT(max_abs_diff(gg.dk, dk_sum), 1e-13);
  EXPECT_LT(max_abs_diff(gg.dv, dv_sum), 1e-13);
}

TEST(Attention, FloatMatchesDouble) {
  Tensor q = randn({2, 5, 4, 8}, 41), k = randn({2, 9, 2, 8}, 42), v = randn({2, 9, 2, 8}, 43);
  Tensor dout = randn(q.shape(), 44), gate = mixed_gate(2, 5, 45);
  auto f = [](const Tensor& t) { return t.to(DType::F32); };
  AttentionOutput od = attention_forward(q, k, v, gate);
  AttentionOutput of = attention_forward(f(q), f(k), f(v), gate);
  EXPECT_LT(testing::rel_rms(of.o, od.o), 1e-6);
  EXPECT_LT(testing::rel_rms(of.lse, od.lse), 1e-6);
  AttentionGrads gd = attention_backward(q, k, v, gate, od.o, od.lse, dout);
  AttentionGrads gf = attention_backward(f(q), f(k), f(v), gate, of.o, of.lse, f(dout));
  EXPECT_LT(testing::rel_rms(gf.dq, gd.dq), 1e-5);
  EXPECT_LT(testing::rel_rms(gf.dk, gd.dk), 1e-5);
  EXPECT_LT(testing::rel_rms(gf.dv, gd.dv), 1e-5);
}

// attention_forward_cache (a decode step of every sequence over a KV cache's storage) is
// attention_forward per sequence on the views of its first lengths[b] rows, exactly: GQA, Tq 1
// and 2, a gate, sequences of different lengths (one filling the storage), f64 and f32. The rows
// past each length hold NaN: never read.
TEST(Attention, CacheEqualsPerSequenceAttention) {
  const int64_t B = 3, C = 9, H = 4, Hkv = 2, D = 6;
  const std::vector<int32_t> lens = {5, 9, 2};
  for (DType dt : {DType::F64, DType::F32}) {
    for (int64_t Tq : {1, 2}) {
      for (bool gated : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " Tq=" << Tq << " gated=" << gated);
        Tensor kc = randn({B, C, Hkv, D}, 11).to(dt), vc = randn({B, C, Hkv, D}, 12).to(dt);
        const int64_t kn = C * Hkv * D;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t e = lens[size_t(b)] * Hkv * D; e < kn; ++e) {
            kc.set_item(b * kn + e, std::numeric_limits<double>::quiet_NaN());
            vc.set_item(b * kn + e, std::numeric_limits<double>::quiet_NaN());
          }
        Tensor q = randn({B, Tq, H, D}, 13).to(dt);
        Tensor gate = gated ? mixed_gate(B, Tq, 14) : Tensor();
        AttentionOutput got =
            attention_forward_cache(q, kc, vc, Tensor::from_vector<int32_t>({B}, lens), gate);
        for (int64_t b = 0; b < B; ++b) {
          const Shape ks{1, lens[size_t(b)], Hkv, D};
          AttentionOutput want = attention_forward(
              q.slice_flat(b * Tq * H * D, {1, Tq, H, D}), kc.slice_flat(b * kn, ks),
              vc.slice_flat(b * kn, ks), gated ? gate.slice_flat(b * Tq, {1, Tq}) : Tensor());
          EXPECT_EQ(max_abs_diff(got.o.slice_flat(b * Tq * H * D, {1, Tq, H, D}), want.o), 0.0) << b;
          EXPECT_EQ(max_abs_diff(got.lse.slice_flat(b * H * Tq, {1, H, Tq}), want.lse), 0.0) << b;
        }
      }
    }
  }
  Tensor q = randn({2, 1, 2, 4}, 1), kc = randn({2, 5, 2, 4}, 2);
  EXPECT_NO_THROW(attention_forward_cache(q, kc, kc, Tensor::from_vector<int32_t>({2}, {1, 5})));
  // A length outside [Tq, C], lengths of the wrong dtype or shape.
  EXPECT_THROW(attention_forward_cache(q, kc, kc, Tensor::from_vector<int32_t>({2}, {0, 3})), Error);
  EXPECT_THROW(attention_forward_cache(q, kc, kc, Tensor::from_vector<int32_t>({2}, {6, 3})), Error);
  EXPECT_THROW(attention_forward_cache(q, kc, kc, Tensor::from_vector<int64_t>({2}, {1, 3})), Error);
  EXPECT_THROW(attention_forward_cache(q, kc, kc, Tensor::from_vector<int32_t>({1}, {1})), Error);
}

TEST(Attention, BadInputsNameTheOpAndShapes) {
  Tensor q = Tensor::zeros({2, 5, 4, 8}, DType::F32);
  Tensor k = Tensor::zeros({2, 6, 2, 8}, DType::F32), v = k;
  try {
    attention_forward(q, Tensor::zeros({2, 6, 2, 7}, DType::F32), v);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "attention_forward: argument 'k' is f32[2,6,2,7]@cpu, expected shape [2,*,*,8]");
  }
  try {
    attention_forward(q, Tensor::zeros({2, 6, 3, 8}, DType::F32), Tensor::zeros({2, 6, 3, 8}, DType::F32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "attention_forward: q has 4 heads and k has 3: the query heads must be a multiple "
                 "of the kv heads (q is f32[2,5,4,8]@cpu, k is f32[2,6,3,8]@cpu)");
  }
  Tensor k_short = Tensor::zeros({2, 4, 2, 8}, DType::F32);
  EXPECT_THROW(attention_forward(q, k_short, k_short), Error);              // Tq > Tk
  EXPECT_THROW(attention_forward(q, k, Tensor::zeros({2, 6, 2, 9}, DType::F32)), Error);
  EXPECT_THROW(attention_forward(q.view({10, 4, 8}), k, v), Error);
  EXPECT_THROW(attention_forward(q, k.to(DType::F64), v), Error);
  EXPECT_THROW(attention_forward(q, k, v, Tensor::zeros({2, 5}, DType::I32)), Error);
  EXPECT_THROW(attention_forward(q, k, v, Tensor::zeros({2, 6}, DType::U8)), Error);
  EXPECT_THROW(attention_forward(q, k, v, Tensor(), std::nan("")), Error);
  AttentionOutput f = attention_forward(q, k, v);
  EXPECT_THROW(attention_backward(q, k, v, Tensor(), f.o, Tensor::zeros({2, 5, 4}, DType::F32), q),
               Error);
  EXPECT_THROW(attention_backward(q, k, v, Tensor(), f.o, f.lse, f.lse), Error);
  EXPECT_THROW(attention_backward(q, k, v, Tensor(), f.o, f.lse.to(DType::F64), q), Error);
}

}  // namespace
}  // namespace amor
