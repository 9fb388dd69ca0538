// CUDA == cpu reference for the flat ops: the poisoning mechanism itself, cast, the elementwise
// ops, SwiGLU, AdamW and the gradient norm. (Norms: parity_norm_test.cpp; RoPE, conv1d, embedding:
// parity_sequence_test.cpp; argument errors on cuda: parity_errors_test.cpp.) Every test skips
// without a GPU. Each checked output prints one line: op, output, shape, dtype, error.
#include <cmath>
#include <limits>

#include "kernels/adamw/adamw.h"
#include "kernels/cast/cast.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/grad_norm/grad_norm.h"
#include "kernels/swiglu/swiglu.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};

// Shapes: realistic (a [B*T, d] activation) and awkward (odd sizes, not a multiple of the 16-byte
// vector, so the scalar tails run).
const Shape kFlatShapes[] = {{4096, 2048}, {3, 7, 13}, {1, 1}};

// f32 values with the cases a conversion can get wrong mixed in: signed zeros, infinities, NaN,
// subnormals, ties between two bf16 values, and values that round up to infinity.
Tensor input_with_specials(const Shape& shape) {
  Tensor x = input(shape, 42, DType::F32, 10.0);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e-40f,                          // subnormal
                            -3e-39f,                         // subnormal
                            1.0f + 0x1p-8f,                  // tie: rounds down to even (1)
                            1.0f + 3 * 0x1p-8f,              // tie: rounds up to even
                            std::numeric_limits<float>::max(),  // rounds up to infinity
                            3.3895313892515355e38f};         // the largest finite bf16
  const int64_t n = sizeof(specials) / sizeof(specials[0]);
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 97) p[i] = specials[(i / 97) % n];
  return x;
}

TEST(CudaParity, PoisonedBlocksAreWhatTheNextAllocationGets) {
  AMOR_REQUIRE_GPU();
  poison({{{1000}, DType::F32}, {{777}, DType::BF16}});
  Tensor a = Tensor::empty({1000}, DType::F32, Device::CUDA);
  Tensor b = Tensor::empty({777}, DType::BF16, Device::CUDA);
  Tensor ha = down(a), hb = down(b);
  for (int64_t i = 0; i < ha.numel(); ++i) ASSERT_TRUE(std::isnan(ha.item(i))) << i;
  for (int64_t i = 0; i < hb.numel(); ++i) ASSERT_TRUE(std::isnan(hb.item(i))) << i;
}

TEST(CudaParity, CastIsExact) {
  AMOR_REQUIRE_GPU();
  for (const Shape& shape : {Shape{4096, 2048}, Shape{13}, Shape{3, 333}}) {
    Tensor x = input_with_specials(shape);
    // f32 -> bf16: rounding to nearest even, bit-identical to the cpu conversion.
    Tensor ref16 = x.to(DType::BF16).to(DType::F32);
    poison({{shape, DType::BF16}});
    Tensor g16 = cast(x.to(Device::CUDA), DType::BF16);
    EXPECT_EQ(g16.dtype(), DType::BF16);
    expect_equal("cast f32->bf16", "y", g16, ref16);
    // bf16 -> f32: exact.
    poison({{shape, DType::F32}});
    expect_equal("cast bf16->f32", "y", cast(g16, DType::F32), ref16);
  }
  // Into a slice at an odd offset: the unaligned (scalar) path.
  Tensor x = parity::input({1001}, 11, DType::F32);
  Tensor buf = Tensor::empty({1003}, DType::BF16, Device::CUDA);
  Tensor dst = buf.slice_flat(1, {1001});
  cast_into(x.to(Device::CUDA).slice_flat(0, {1001}), dst);
  expect_equal("cast_into (offset 1)", "dst", dst, x.to(DType::BF16).to(DType::F32));
}

// Binary maps: add, mul, sigmoid_backward, silu_backward; unary: scale, sigmoid, silu.
TEST(CudaParity, ElementwiseMaps) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 100;
  for (const Shape& shape : kFlatShapes) {
    for (DType dt : kDtypes) {
      Tensor a = input(shape, ++seed, dt), b = input(shape, ++seed, dt);
      Tensor s = input_uniform(shape, ++seed, dt, 0.01, 0.99);  // a sigmoid output
      Tensor ga = up(a, dt), gb = up(b, dt), gs = up(s, dt);
      auto run = [&](const char* op, auto gpu_call, const Tensor& ref, bool grad) {
        poison({{shape, dt}});
        expect_close(op, grad ? "dx" : "y", gpu_call(), ref, grad ? grad_tol(dt) : out_tol(dt));
      };
      run("add", [&] { return add(ga, gb); }, add(a, b), false);
      run("mul", [&] { return mul(ga, gb); }, mul(a, b), false);
      run("scale", [&] { return scale(ga, -0.37); }, scale(a, -0.37), false);
      run("sigmoid_forward", [&] { return sigmoid_forward(ga); }, sigmoid_forward(a), false);
      run("sigmoid_backward", [&] { return sigmoid_backward(gs, gb); }, sigmoid_backward(s, b),
          true);
      run("silu_forward", [&] { return silu_forward(ga); }, silu_forward(a), false);
      run("silu_backward", [&] { return silu_backward(ga, gb); }, silu_backward(a, b), true);
    }
  }
}

TEST(CudaParity, AddInPlaceIncludingBf16IntoF32) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 200;
  for (const Shape& shape : kFlatShapes) {
    for (DType dt : kDtypes) {
      Tensor a = input(shape, ++seed, dt), b = input(shape, ++seed, dt);
      Tensor ga = up(a, dt);
      add_(ga, up(b, dt), 0.75);
      add_(a, b, 0.75);
      expect_close("add_", "a", ga, a, out_tol(dt));
    }
    // f32 accumulator += bf16 gradient: computed in f32, so f32 tolerance.
    Tensor a = input(shape, ++seed, DType::F32), b = input(shape, ++seed, DType::BF16);
    Tensor ga = up(a, DType::F32);
    add_(ga, up(b, DType::BF16), -1.5);
    add_(a, b, -1.5);
    expect_close("add_ (f32 += bf16)", "a", ga, a, kF32Tol);
  }
  // Unaligned views (offset 1): the scalar path of the same kernel.
  Tensor a = input({2051}, 300, DType::F32), b = input({2051}, 301, DType::BF16);
  Tensor ga = up(a, DType::F32);
  Tensor gav = ga.slice_flat(1, {2050});
  add_(gav, up(b, DType::BF16).slice_flat(1, {2050}), 2.0);
  Tensor av = a.slice_flat(1, {2050});
  add_(av, b.slice_flat(1, {2050}), 2.0);
  expect_close("add_ (f32 += bf16, offset 1)", "a", ga, a, kF32Tol);
}

// Per-channel ops: realistic [B*T, H] (dt with H heads) and [B*T, d], awkward odd ones.
TEST(CudaParity, BiasSoftplusAndChannelScale) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 400;
  for (const Shape& shape : {Shape{8192, 48}, Shape{4096, 2048}, Shape{5, 3, 11}, Shape{1, 8}}) {
    const Shape ch{shape.back()};
    for (DType dt : kDtypes) {
      Tensor x = input(shape, ++seed, dt, 3.0), v = input(ch, ++seed, dt);
      Tensor dy = input(shape, ++seed, dt);
      Tensor gx = up(x, dt), gv = up(v, dt), gdy = up(dy, dt);

      poison({{shape, dt}});
      expect_close("bias_softplus_forward", "y", bias_softplus_forward(gx, gv),
                   bias_softplus_forward(x, v), out_tol(dt));
      poison({{shape, dt}, {ch, DType::F32}});
      BiasSoftplusGrads g = bias_softplus_backward(gx, gv, gdy);
      BiasSoftplusGrads r = bias_softplus_backward(x, v, dy);
      EXPECT_EQ(g.dbias.dtype(), DType::F32);
      expect_close("bias_softplus_backward", "dx", g.dx, r.dx, grad_tol(dt));
      expect_close("bias_softplus_backward", "dbias", g.dbias, r.dbias, kF32Tol);

      poison({{shape, dt}});
      expect_close("channel_scale_forward", "y", channel_scale_forward(gx, gv),
                   channel_scale_forward(x, v), out_tol(dt));
      // channel_scale_add: the two ops' bits on the GPU, the cpu reference's value to out_tol.
      Tensor h = input(shape, ++seed, dt), gh = up(h, dt);
      poison({{shape, dt}});
      const Tensor fused = channel_scale_add(gh, gx, gv);
      expect_equal("channel_scale_add", "y", fused, down(add(gh, channel_scale_forward(gx, gv))));
      expect_close("channel_scale_add", "y", fused, channel_scale_add(h, x, v), out_tol(dt));
      poison({{shape, dt}, {ch, DType::F32}});
      ChannelScaleGrads cg = channel_scale_backward(gx, gv, gdy);
      ChannelScaleGrads cr = channel_scale_backward(x, v, dy);
      expect_close("channel_scale_backward", "dx", cg.dx, cr.dx, grad_tol(dt));
      expect_close("channel_scale_backward", "ds", cg.ds, cr.ds, kF32Tol);
    }
  }
}

TEST(CudaParity, Swiglu) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 500;
  for (const Shape& shape : {Shape{4096, 5632}, Shape{3, 5, 7}, Shape{1, 1}}) {
    for (DType dt : kDtypes) {
      Tensor g = input(shape, ++seed, dt, 2.0), u = input(shape, ++seed, dt);
      Tensor dh = input(shape, ++seed, dt);
      poison({{shape, dt}});
      expect_close("swiglu_forward", "h", swiglu_forward(up(g, dt), up(u, dt)),
                   swiglu_forward(g, u), out_tol(dt));
      poison({{shape, dt}});
      SwigluGrads gg = swiglu_backward(up(g, dt), up(u, dt), up(dh, dt));
      SwigluGrads rr = swiglu_backward(g, u, dh);
      expect_close("swiglu_backward", "dg", gg.dg, rr.dg, grad_tol(dt));
      expect_close("swiglu_backward", "du", gg.du, rr.du, grad_tol(dt));
    }
  }
}

// f32 master weights and moments, f32 or bf16 gradients; three steps; the update is formed with
// correctly rounded f32 operations in the reference's order, so it matches bit for bit.
TEST(CudaParity, AdamwMatchesTheReferenceBitForBit) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 600;
  for (int64_t n : {int64_t(1) << 22, int64_t(1001)}) {
    for (DType gdt : kDtypes) {
      Tensor p = input({n}, ++seed, DType::F32, 0.02);
      Tensor m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
      Tensor gp = up(p, DType::F32), gm = up(m, DType::F32), gv = up(v, DType::F32);
      for (int64_t step = 1; step <= 3; ++step) {
        Tensor grad = input({n}, ++seed, gdt, 0.1);
        adamw_step(p, grad, m, v, step, 3e-4, 0.9, 0.95, 1e-8, 0.1);
        adamw_step(gp, up(grad, gdt), gm, gv, step, 3e-4, 0.9, 0.95, 1e-8, 0.1);
      }
      const std::string op = std::string("adamw_step (grad ") + dtype_name(gdt) + ")";
      expect_equal(op, "param", gp, p);
      expect_equal(op, "m", gm, m);
      expect_equal(op, "v", gv, v);
    }
  }
}

TEST(CudaParity, GradNormOverMixedDevicesAndClipping) {
  AMOR_REQUIRE_GPU();
  // cpu f32 reference values of every gradient (bf16 ones rounded first).
  std::vector<Tensor> ref{input({(1 << 22) + 5}, 700, DType::F32), input({777}, 701, DType::BF16),
                          input({3}, 702, DType::F32), input({1, 2049}, 703, DType::BF16)};
  std::vector<Tensor> gpu{up(ref[0], DType::F32), up(ref[1], DType::BF16), ref[2].clone(),
                          up(ref[3], DType::BF16)};
  const double want = sum_of_squares(ref), got = sum_of_squares(gpu);
  std::printf("[parity] %-40s %-9s %-18s %-5s rel %.3e\n", "sum_of_squares", "total",
              "(4 grads)", "mixed", std::abs(got - want) / want);
  EXPECT_NEAR(got, want, 1e-10 * want);  // both sum exact f64 squares, in different orders

  std::vector<Tensor> empty;
  EXPECT_EQ(sum_of_squares(empty), 0.0);

  const double max_norm = 0.37 * std::sqrt(want);
  const double norm_ref = clip_grad_norm(ref, max_norm);
  const double norm_gpu = clip_grad_norm(gpu, max_norm);
  EXPECT_NEAR(norm_gpu, norm_ref, 1e-10 * norm_ref);
  // The scale is applied in f32 (bf16 grads: computed in f32, stored rounded).
  expect_close("scale_grads", "g[0]", gpu[0], ref[0], kF32Tol);
  expect_close("scale_grads", "g[1]", gpu[1], ref[1], out_tol(DType::BF16));
  expect_close("scale_grads", "g[2]", gpu[2], ref[2], kF32Tol);
  expect_close("scale_grads", "g[3]", gpu[3], ref[3], out_tol(DType::BF16));
}

}  // namespace
}  // namespace amor::parity
