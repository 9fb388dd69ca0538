// CUDA == cpu reference for the ops along the sequence: RoPE (offsets, explicit positions and a
// decode step's device lengths),
// the causal depthwise conv1d (forward, backward, decode step) and the token embedding.
#include "kernels/conv1d/conv1d.h"
#include "kernels/embedding/embedding.h"
#include "kernels/rope/rope.h"
#include "tests/common/random.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};

struct RopeCase {
  Shape shape;  // [B,T,H,Dh]
  int64_t offset;
};

// Realistic training shape; decode (T = 1) deep into a long context, where an f32 angle would be
// visibly off; an odd head dim (half = 5: the scalar path) and odd B, T, H.
const RopeCase kRopeCases[] = {
    {{4, 2048, 16, 64}, 0}, {{8, 1, 16, 64}, 16383}, {{2, 7, 3, 10}, 3}, {{1, 5, 2, 128}, 0}};

TEST(CudaParity, Rope) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 2000;
  for (const RopeCase& c : kRopeCases) {
    for (DType dt : kDtypes) {
      Tensor x = input(c.shape, ++seed, dt), dy = input(c.shape, ++seed, dt);
      poison({{c.shape, dt}});
      expect_close("rope_forward", "y", rope_forward(up(x, dt), c.offset),
                   rope_forward(x, c.offset), out_tol(dt));
      poison({{c.shape, dt}});
      expect_close("rope_backward", "dx", rope_backward(up(dy, dt), c.offset),
                   rope_backward(dy, c.offset), grad_tol(dt));
    }
  }
}

TEST(CudaParity, RopeWithPositions) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 2100;
  const Shape shape{3, 257, 4, 64};
  const int64_t B = shape[0], T = shape[1];
  // Per sequence (packed documents restarting at 0) and shared by the batch; on either device.
  Tensor per_seq = Tensor::empty({B, T}, DType::I64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      per_seq.data<int64_t>()[b * T + t] = (t * (b + 1)) % 100 + 7 * b;
  Tensor shared = Tensor::empty({T}, DType::I64);
  for (int64_t t = 0; t < T; ++t) shared.data<int64_t>()[t] = 3 * t + 1000;
  for (const Tensor& pos : {per_seq, shared, per_seq.to(Device::CUDA)}) {
    for (DType dt : kDtypes) {
      Tensor x = input(shape, ++seed, dt);
      Tensor host_pos = pos.to(Device::CPU);
      poison({{shape, dt}});
      expect_close("rope_forward_positions", "y", rope_forward_positions(up(x, dt), pos),
                   rope_forward_positions(x, host_pos), out_tol(dt));
      poison({{shape, dt}});
      expect_close("rope_backward_positions", "dx", rope_backward_positions(up(x, dt), pos),
                   rope_backward_positions(x, host_pos), grad_tol(dt));
    }
  }
}

// A decode step's rotation at each sequence's cache length, read on the device (KV cache decode
// steps in CUDA graphs, models/infer/kv_cache.h): against the cpu reference, and bitwise equal to
// the GPU's explicit positions (lengths[b] + t): a step rotated either way gives the same keys.
// Emulator sized (T 1 as at decode, and 3; an odd head dim: the scalar path).
TEST(CudaParity, RopeLengths) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 2200;
  for (const Shape& shape : {Shape{3, 1, 4, 64}, Shape{2, 3, 3, 10}}) {
    const int64_t B = shape[0], T = shape[1];
    const std::vector<int32_t> lens = {0, 16383, 7};
    Tensor lengths = Tensor::from_vector<int32_t>({B}, std::vector<int32_t>(lens.begin(), lens.begin() + B));
    Tensor pos = Tensor::empty({B, T}, DType::I64);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[b * T + t] = lens[size_t(b)] + t;
    for (DType dt : kDtypes) {
      Tensor x = input(shape, ++seed, dt);
      poison({{shape, dt}});
      const Tensor y = rope_forward_lengths(up(x, dt), lengths.to(Device::CUDA));
      expect_close("rope_forward_lengths", "y", y, rope_forward_lengths(x, lengths), out_tol(dt));
      expect_equal("rope_forward_lengths", "y == positions'", y,
                   down(rope_forward_positions(up(x, dt), pos)));
    }
  }
}

struct ConvCase {
  int64_t B, T, C, K;
  bool bias, silu, state;
};

// Mamba2's xBC conv at 180M scale (C = d_inner + 2N = 1792) and realistic T; T not a multiple of
// the 64-step chunk, T = 1, T shorter than the state (T < K - 1), an odd channel count (the
// scalar path), other kernel sizes, no bias, no SiLU.
const ConvCase kConvCases[] = {
    {2, 2048, 1792, 4, true, true, true}, {3, 130, 64, 4, true, true, true},
    {2, 1, 256, 4, true, true, true},     {2, 2, 40, 4, false, true, true},
    {2, 65, 13, 4, true, false, true},    {1, 100, 24, 3, true, true, false},
    {2, 70, 8, 1, false, false, false},   {2, 300, 12, 8, true, true, true}};

TEST(CudaParity, Conv1d) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 2200;
  for (const ConvCase& c : kConvCases) {
    const std::string op = "conv1d K=" + std::to_string(c.K) + (c.bias ? " bias" : "") +
                           (c.silu ? " silu" : "") + (c.state ? " state" : "");
    const Shape xs{c.B, c.T, c.C}, ss{c.B, c.C, c.K - 1};
    for (DType dt : kDtypes) {
      Tensor x = input(xs, ++seed, dt), w = input({c.C, c.K}, ++seed, dt, 0.5);
      Tensor bias = c.bias ? input({c.C}, ++seed, dt) : Tensor();
      Tensor s0 = c.state ? input(ss, ++seed, dt) : Tensor();
      Tensor dy = input(xs, ++seed, dt), ds1 = input(ss, ++seed, dt);
      auto gpu = [&](const Tensor& t) { return t.defined() ? up(t, dt) : Tensor(); };

      poison({{xs, dt}, {ss, dt}});
      Conv1dOutput g = conv1d_forward(gpu(x), gpu(w), gpu(bias), c.silu, gpu(s0));
      Conv1dOutput r = conv1d_forward(x, w, bias, c.silu, s0);
      expect_close(op + " fwd", "y", g.y, r.y, out_tol(dt));
      if (c.K > 1) expect_close(op + " fwd", "state", g.final_state, r.final_state, out_tol(dt));

      poison({{xs, dt}, {ss, dt}, {{c.C, c.K}, DType::F32}, {{c.C}, DType::F32}});
      Conv1dGrads gg = conv1d_backward(gpu(x), gpu(w), gpu(bias), c.silu, gpu(s0), gpu(dy),
                                       c.K > 1 ? gpu(ds1) : Tensor());
      Conv1dGrads rr = conv1d_backward(x, w, bias, c.silu, s0, dy, c.K > 1 ? ds1 : Tensor());
      expect_close(op + " bwd", "dx", gg.dx, rr.dx, grad_tol(dt));
      expect_close(op + " bwd", "dweight", gg.dweight, rr.dweight, kF32Tol);
      if (c.bias) expect_close(op + " bwd", "dbias", gg.dbias, rr.dbias, kF32Tol);
      if (c.state && c.K > 1)
        expect_close(op + " bwd", "dstate", gg.dinitial_state, rr.dinitial_state, grad_tol(dt));
    }
  }
}

TEST(CudaParity, Conv1dStepsEqualTheCpuSteps) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 2300;
  for (const ConvCase& c : {ConvCase{4, 5, 1792, 4, true, true, true},
                            ConvCase{3, 3, 13, 3, false, false, true}}) {
    for (DType dt : kDtypes) {
      Tensor w = input({c.C, c.K}, ++seed, dt, 0.5);
      Tensor bias = c.bias ? input({c.C}, ++seed, dt) : Tensor();
      Tensor state = input({c.B, c.C, c.K - 1}, ++seed, dt);
      Tensor gstate = up(state, dt), gw = up(w, dt);
      Tensor gbias = c.bias ? up(bias, dt) : Tensor();
      for (int64_t t = 0; t < c.T; ++t) {
        Tensor x_t = input({c.B, c.C}, ++seed, dt);
        poison({{{c.B, c.C}, dt}});
        Tensor gy = conv1d_step(up(x_t, dt), gstate, gw, gbias, c.silu);
        Tensor ry = conv1d_step(x_t, state, w, bias, c.silu);
        expect_close("conv1d_step K=" + std::to_string(c.K), "y", gy, ry, out_tol(dt));
      }
      // The state holds inputs only, so it is exactly the cpu's.
      expect_equal("conv1d_step K=" + std::to_string(c.K), "state", gstate, state);
    }
  }
}

TEST(CudaParity, Embedding) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 2400;
  struct Case {
    Shape ids;
    int64_t vocab, d;
  };
  // A realistic batch, a tiny vocabulary (every row repeated many times: the atomics collide), an
  // odd width (the scalar path), and one token.
  for (const Case& c : {Case{{4, 512}, 32000, 2048}, Case{{3, 50}, 7, 64}, Case{{3, 5}, 11, 13},
                        Case{{1, 1}, 5, 8}}) {
    for (DType dt : kDtypes) {
      Tensor ids = testing::randint(c.ids, ++seed, c.vocab);
      Tensor w = input({c.vocab, c.d}, ++seed, dt);
      Shape ys = c.ids;
      ys.push_back(c.d);
      Tensor dy = input(ys, ++seed, dt);
      Tensor gids = ids.to(Device::CUDA);
      poison({{ys, dt}});
      expect_equal("embedding_forward", "y", embedding_forward(gids, up(w, dt)),
                   embedding_forward(ids, w));
      poison({{{c.vocab, c.d}, DType::F32}});
      Tensor gdw = embedding_backward(gids, up(dy, dt), c.vocab);
      EXPECT_EQ(gdw.dtype(), DType::F32);
      expect_close("embedding_backward", "dW", gdw, embedding_backward(ids, dy, c.vocab), kF32Tol);
    }
  }
}

}  // namespace
}  // namespace amor::parity
