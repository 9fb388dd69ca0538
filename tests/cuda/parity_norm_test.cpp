// CUDA == cpu reference for the row norms: RMSNorm (plain and gated, both gate orders, per-group
// statistics) and L2-norm, forward and backward, at realistic and awkward shapes.
#include "kernels/l2norm/l2norm.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};

// rows x d: a [B*T, d_model] activation, one token (T = 1), a wide d_inner row, and widths that
// are not a multiple of the 16-byte vector (the scalar path) or of a warp.
const Shape kRmsShapes[] = {{4096, 2048}, {1, 2048}, {2, 3, 8192}, {7, 100}, {3, 13}};

TEST(CudaParity, RmsNorm) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (const Shape& shape : kRmsShapes) {
    const int64_t d = shape.back(), rows = shape_numel(shape) / d;
    for (DType dt : kDtypes) {
      Tensor x = input(shape, ++seed, dt, 2.0), w = input({d}, ++seed, dt);
      Tensor dy = input(shape, ++seed, dt);
      Tensor gx = up(x, dt), gw = up(w, dt);
      poison({{shape, dt}, {{rows}, DType::F32}});
      RMSNormOut g = rmsnorm_forward(gx, gw, 1e-5);
      RMSNormOut r = rmsnorm_forward(x, w, 1e-5);
      EXPECT_EQ(g.rstd.dtype(), DType::F32);
      expect_close("rmsnorm_forward", "y", g.y, r.y, out_tol(dt));
      expect_close("rmsnorm_forward", "rstd", g.rstd, r.rstd, kF32Tol);

      poison({{shape, dt}, {{d}, DType::F32}});
      RMSNormGrads gg = rmsnorm_backward(gx, gw, g.rstd, up(dy, dt));
      RMSNormGrads rr = rmsnorm_backward(x, w, r.rstd, dy);
      EXPECT_EQ(gg.dw.dtype(), DType::F32);
      expect_close("rmsnorm_backward", "dx", gg.dx, rr.dx, grad_tol(dt));
      expect_close("rmsnorm_backward", "dw", gg.dw, rr.dw, kF32Tol);
    }
  }
}

struct GatedCase {
  Shape shape;
  int64_t group;
};

// Mamba2 (one group over d_inner), Gated DeltaNet (a group per 128-wide head), and groups that
// are not a multiple of the vector width or of a warp.
const GatedCase kGatedCases[] = {
    {{2048, 4096}, 4096}, {{4, 512, 1536}, 128}, {{1, 1, 1536}, 128}, {{5, 96}, 24}, {{3, 30}, 10}};

TEST(CudaParity, RmsNormGated) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 1100;
  for (const GatedCase& c : kGatedCases) {
    const int64_t d = c.shape.back(), rows = shape_numel(c.shape) / d;
    const Shape rstd_shape{rows, d / c.group};
    for (bool norm_before_gate : {false, true}) {
      const std::string op = norm_before_gate ? "rmsnorm_gated (norm first)" : "rmsnorm_gated";
      for (DType dt : kDtypes) {
        Tensor x = input(c.shape, ++seed, dt), z = input(c.shape, ++seed, dt, 2.0);
        Tensor w = input({d}, ++seed, dt), dy = input(c.shape, ++seed, dt);
        Tensor gx = up(x, dt), gz = up(z, dt), gw = up(w, dt), gdy = up(dy, dt);
        poison({{c.shape, dt}, {rstd_shape, DType::F32}});
        RMSNormOut g = rmsnorm_gated_forward(gx, gz, gw, c.group, 1e-5, norm_before_gate);
        RMSNormOut r = rmsnorm_gated_forward(x, z, w, c.group, 1e-5, norm_before_gate);
        expect_close(op + " fwd", "y", g.y, r.y, out_tol(dt));
        expect_close(op + " fwd", "rstd", g.rstd, r.rstd, kF32Tol);

        RMSNormGatedGrads rr =
            rmsnorm_gated_backward(x, z, w, r.rstd, dy, c.group, 1e-5, norm_before_gate);
        poison({{c.shape, dt}, {{d}, DType::F32}});
        RMSNormGatedGrads gg =
            rmsnorm_gated_backward(gx, gz, gw, g.rstd, gdy, c.group, 1e-5, norm_before_gate);
        expect_close(op + " bwd", "dx", gg.dx, rr.dx, grad_tol(dt));
        expect_close(op + " bwd", "dz", gg.dz, rr.dz, grad_tol(dt));
        expect_close(op + " bwd", "dw", gg.dw, rr.dw, kF32Tol);

        // Without a saved rstd the backward recomputes it.
        poison({{c.shape, dt}, {{d}, DType::F32}, {rstd_shape, DType::F32}});
        RMSNormGatedGrads gr =
            rmsnorm_gated_backward(gx, gz, gw, Tensor(), gdy, c.group, 1e-5, norm_before_gate);
        expect_close(op + " bwd (recompute)", "dx", gr.dx, rr.dx, grad_tol(dt));
        expect_close(op + " bwd (recompute)", "dw", gr.dw, rr.dw, kF32Tol);
      }
    }
  }
}

// Rows of one head: [B,T,H,64] for Gated DeltaNet's q and k, one token, a 128-wide head, and odd
// widths (fewer lanes than a warp; not a multiple of the vector).
const Shape kL2Shapes[] = {{4, 2048, 16, 64}, {1, 1, 16, 128}, {5, 37}, {2, 3, 1000}};

TEST(CudaParity, L2Norm) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 1200;
  for (const Shape& shape : kL2Shapes) {
    const int64_t rows = shape_numel(shape) / shape.back();
    for (DType dt : kDtypes) {
      Tensor x = input(shape, ++seed, dt), dy = input(shape, ++seed, dt);
      Tensor gx = up(x, dt);
      poison({{shape, dt}, {{rows}, DType::F32}});
      L2NormOut g = l2norm_forward(gx, 1e-6);
      L2NormOut r = l2norm_forward(x, 1e-6);
      expect_close("l2norm_forward", "y", g.y, r.y, out_tol(dt));
      expect_close("l2norm_forward", "rstd", g.rstd, r.rstd, kF32Tol);
      poison({{shape, dt}});
      expect_close("l2norm_backward", "dx", l2norm_backward(gx, g.rstd, up(dy, dt)),
                   l2norm_backward(x, r.rstd, dy), grad_tol(dt));
    }
  }
}

}  // namespace
}  // namespace amor::parity
