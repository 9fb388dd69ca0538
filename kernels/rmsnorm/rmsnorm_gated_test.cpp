#include "kernels/rmsnorm/rmsnorm_gated.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/rmsnorm/rmsnorm.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor {
namespace {

using testing::gradcheck;
using testing::randn;

struct Mode {
  int64_t group;
  bool norm_before_gate;
};

// Gradients of x, z, w for both gate orders, with one group per row (G = D = 15) and with
// three groups of 5, on 2x3 rows.
TEST(RMSNormGated, GradcheckDoubleBothModesAndGroupSizes) {
  for (Mode m : {Mode{15, false}, Mode{15, true}, Mode{5, false}, Mode{5, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "group_size=" << m.group << " norm_before_gate=" << m.norm_before_gate);
    Tensor x = randn({2, 3, 15}, 1, DType::F64, 1.5), z = randn({2, 3, 15}, 2, DType::F64, 2.0);
    Tensor w = randn({15}, 3), dy = randn({2, 3, 15}, 4);
    const double eps = 1e-5;
    RMSNormOut out = rmsnorm_gated_forward(x, z, w, m.group, eps, m.norm_before_gate);
    EXPECT_EQ(out.rstd.shape(), (Shape{6, 15 / m.group}));
    RMSNormGatedGrads g =
        rmsnorm_gated_backward(x, z, w, out.rstd, dy, m.group, eps, m.norm_before_gate);
    auto reports = gradcheck(
        [&] {
          return std::vector<Tensor>{
              rmsnorm_gated_forward(x, z, w, m.group, eps, m.norm_before_gate).y};
        },
        {dy}, {{"x", x, g.dx}, {"z", z, g.dz}, {"w", w, g.dw}});
    for (auto& r : reports)
      RecordProperty(
          "G" + std::to_string(m.group) + (m.norm_before_gate ? "_nbg_" : "_gbn_") + r.name,
          fmt::format("{:.2e}", r.error));
  }
}

// With one group and the gate after the norm, the gated norm is plain RMSNorm times silu(z).
TEST(RMSNormGated, OneGroupNormBeforeGateIsPlainRMSNormTimesSilu) {
  Tensor x = randn({5, 12}, 5), z = randn({5, 12}, 6), w = randn({12}, 7);
  Tensor gated = rmsnorm_gated_forward(x, z, w, 12, 1e-6, true).y;
  Tensor plain = rmsnorm_forward(x, w, 1e-6).y;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double zi = z.item(i);
    EXPECT_NEAR(gated.item(i), plain.item(i) * zi / (1 + std::exp(-zi)), 1e-14);
  }
}

// Each group is normalised on its own: scaling one group's input leaves the other groups' outputs.
TEST(RMSNormGated, GroupsAreIndependent) {
  Tensor x = randn({1, 8}, 8), z = randn({1, 8}, 9), w = randn({8}, 10);
  Tensor y0 = rmsnorm_gated_forward(x, z, w, 4, 1e-6, false).y;
  for (int64_t j = 0; j < 4; ++j) x.set_item(j, 10 * x.item(j));
  Tensor y1 = rmsnorm_gated_forward(x, z, w, 4, 1e-6, false).y;
  for (int64_t j = 4; j < 8; ++j) EXPECT_EQ(y1.item(j), y0.item(j));
}

TEST(RMSNormGated, UndefinedRstdIsRecomputed) {
  Tensor x = randn({4, 6}, 11), z = randn({4, 6}, 12), w = randn({6}, 13), dy = randn({4, 6}, 14);
  RMSNormOut out = rmsnorm_gated_forward(x, z, w, 3, 1e-5, false);
  RMSNormGatedGrads a = rmsnorm_gated_backward(x, z, w, out.rstd, dy, 3, 1e-5, false);
  RMSNormGatedGrads b = rmsnorm_gated_backward(x, z, w, Tensor(), dy, 3, 1e-5, false);
  EXPECT_EQ(testing::max_abs_diff(a.dx, b.dx), 0.0);
  EXPECT_EQ(testing::max_abs_diff(a.dz, b.dz), 0.0);
  EXPECT_EQ(testing::max_abs_diff(a.dw, b.dw), 0.0);
}

TEST(RMSNormGated, FloatMatchesDouble) {
  for (bool nbg : {false, true}) {
    Tensor x = randn({7, 24}, 15), z = randn({7, 24}, 16), w = randn({24}, 17),
           dy = randn({7, 24}, 18);
    RMSNormOut od = rmsnorm_gated_forward(x, z, w, 8, 1e-5, nbg);
    RMSNormGatedGrads gd = rmsnorm_gated_backward(x, z, w, od.rstd, dy, 8, 1e-5, nbg);
    Tensor xf = x.to(DType::F32), zf = z.to(DType::F32), wf = w.to(DType::F32);
    RMSNormOut of = rmsnorm_gated_forward(xf, zf, wf, 8, 1e-5, nbg);
    RMSNormGatedGrads gf =
        rmsnorm_gated_backward(xf, zf, wf, of.rstd, dy.to(DType::F32), 8, 1e-5, nbg);
    EXPECT_LT(testing::rel_rms(of.y, od.y), 1e-6);
    EXPECT_LT(testing::rel_rms(gf.dx, gd.dx), 1e-6);
    EXPECT_LT(testing::rel_rms(gf.dz, gd.dz), 1e-6);
    EXPECT_LT(testing::rel_rms(gf.dw, gd.dw), 1e-6);
  }
}

TEST(RMSNormGated, BadInputsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({4, 12}, DType::F32), w = Tensor::zeros({12}, DType::F32);
  try {
    rmsnorm_gated_forward(x, x, w, 5, 1e-5, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "rmsnorm_gated_forward: group_size 5 does not divide the last dimension of x "
                 "f32[4,12]@cpu");
  }
  try {
    rmsnorm_gated_forward(x, Tensor::zeros({4, 11}, DType::F32), w, 4, 1e-5, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "rmsnorm_gated_forward: argument 'z' is f32[4,11]@cpu, expected shape [4,12]");
  }
  EXPECT_THROW(rmsnorm_gated_forward(x, x, w, 0, 1e-5, false), Error);
  EXPECT_THROW(rmsnorm_gated_forward(x, x, Tensor::zeros({6}, DType::F32), 6, 1e-5, false), Error);
  EXPECT_THROW(rmsnorm_gated_forward(x, x.to(DType::F64), w, 4, 1e-5, false), Error);
  EXPECT_THROW(
      rmsnorm_gated_backward(x, x, w, Tensor::zeros({4, 2}, DType::F32), x, 4, 1e-5, false), Error);
  EXPECT_THROW(
      rmsnorm_gated_backward(x, x, w, Tensor::zeros({4, 3}, DType::F64), x, 4, 1e-5, false), Error);
  EXPECT_THROW(
      rmsnorm_gated_backward(x, x, w, Tensor(), Tensor::zeros({4, 13}, DType::F32), 4, 1e-5, false),
      Error);
}

}  // namespace
}  // namespace amor
