// CUDA == cpu reference for the gated delta rule: the chunked forward (o, final_state), the
// backward (dq, dk, dv, dg, dbeta, dinitial_state) and the decode step.
//
// Inputs are what the model hands the op: q, k rows of unit L2 norm per head, g = -A_h dt_t (A_h
// in [0.5, 16) per head as fla's A_log init, dt in [0.001, 0.03): g in (-0.5, 0)), beta in
// (0.05, 0.95). Every input is rounded to bf16 once and the cpu reference (the chunked
// algorithm, f32) runs once on those values; the f32 and the bf16 GPU runs both compute on exactly
// them, so differences are summation order, the GPU's expf and the rounding of the outputs.
// f32 runs (SIMT f32 products): o <= 1e-5, dq, dk, dv <= 1e-5, final state and dinitial_state
// <= 1e-5; dg and dbeta <= 1e-4, since each is a sum of O(chunk^2) terms of both signs
// (dgam_r = sum_j dP_rj P_rj - sum_j dP_jr P_jr ...) that cancel to a much smaller result, where
// f32 rounding of the terms shows at ~1e-5 of the result.
// bf16 runs multiply on tensor cores: every product's operands are rounded to bf16 (states,
// Tm, W, Vn, P included; f32 accumulation), so every result, the f32-stored ones included, is
// held to design §2's bf16 scan tolerance, 2e-2 (the emulator measures ~3e-3 on each).
#include <cmath>

#include "kernels/gated_delta/gated_delta.h"
#include "kernels/gated_delta/gated_delta_testing.h"
#include "tests/common/random.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};
constexpr double kScanTolBf16 = 2e-2;  // design §2: scans and their gate gradients, bf16

struct GdnCase {
  int64_t B, T, H, K, V, chunk;
  bool s0, dsf;       // with initial_state / d_final_state
  bool gates_bf16;    // bf16 runs pass g, beta and initial_state as bf16 (else f32)
  int64_t gpu_chunk;  // the chunk_size given to the GPU (0: the recurrence's name)
  bool bf16_only = false;  // shapes whose f32 tiles exceed the shared memory (K = 128)
};

struct GdnInputs {
  Tensor q, k, v, g, beta, s0, d_o, dsf;  // f32 cpu, every value representable in bf16
};

GdnInputs make_inputs(const GdnCase& c, uint64_t seed) {
  GdnInputs x;
  x.q =
      testing::unit_rows({c.B, c.T, c.H, c.K}, seed + 1, DType::F32).to(DType::BF16).to(DType::F32);
  x.k =
      testing::unit_rows({c.B, c.T, c.H, c.K}, seed + 2, DType::F32).to(DType::BF16).to(DType::F32);
  x.v = input({c.B, c.T, c.H, c.V}, seed + 3, DType::BF16);
  x.d_o = input({c.B, c.T, c.H, c.V}, seed + 4, DType::BF16);
  // g = -A_h dt: the model's -exp(A_log) softplus(...) with A in [0.5, 16), dt in [0.001, 0.03).
  const Tensor a = testing::uniform({c.H}, seed + 5, 0.5, 16.0, DType::F32);
  const Tensor dt = testing::uniform({c.B, c.T, c.H}, seed + 6, 0.001, 0.03, DType::F32);
  x.g = Tensor::empty({c.B, c.T, c.H}, DType::F32);
  for (int64_t i = 0; i < x.g.numel(); ++i)
    x.g.data<float>()[i] = -a.data<float>()[i % c.H] * dt.data<float>()[i];
  x.g = x.g.to(DType::BF16).to(DType::F32);
  x.beta = input_uniform({c.B, c.T, c.H}, seed + 7, DType::BF16, 0.05, 0.95);
  if (c.s0) x.s0 = input({c.B, c.H, c.K, c.V}, seed + 8, DType::BF16, 0.5);
  if (c.dsf) x.dsf = input({c.B, c.H, c.K, c.V}, seed + 9, DType::BF16, 0.1);
  return x;
}

Tensor up_or_none(const Tensor& t, DType d) { return t.defined() ? up(t, d) : Tensor(); }

void check_case(const GdnCase& c, uint64_t seed, bool backward) {
  const GdnInputs x = make_inputs(c, seed);
  const double scale = gated_delta_default_scale(c.K);
  const std::string shape = "B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " H" +
                            std::to_string(c.H) + " K" + std::to_string(c.K) + " V" +
                            std::to_string(c.V) + " L" + std::to_string(c.gpu_chunk) +
                            (c.s0 ? " s0" : "") + (c.dsf ? " dsf" : "");
  const GatedDeltaOut ref = gated_delta_forward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, c.chunk);
  GatedDeltaGrads rg;
  if (backward)
    rg = gated_delta_backward(x.q, x.k, x.v, x.g, x.beta, x.s0, scale, x.d_o, x.dsf, c.chunk);
  const Shape qs{c.B, c.T, c.H, c.K}, vs{c.B, c.T, c.H, c.V}, gs{c.B, c.T, c.H},
      ss{c.B, c.H, c.K, c.V};
  for (DType dt : kDtypes) {
    const bool bf = dt == DType::BF16;
    if (c.bf16_only && !bf) continue;
    const DType gate_dt = bf && c.gates_bf16 ? DType::BF16 : DType::F32;
    const Tensor q = up(x.q, dt), k = up(x.k, dt), v = up(x.v, dt);
    const Tensor g = up(x.g, gate_dt), beta = up(x.beta, gate_dt);
    const Tensor s0 = up_or_none(x.s0, gate_dt);  // bf16 states with bf16 gates
    // Tolerances as the header explains: bf16 runs (tensor cores) at the scan tolerance throughout.
    const double o_tol = bf ? kScanTolBf16 : out_tol(dt), g_tol = bf ? kScanTolBf16 : grad_tol(dt);
    const double state_tol = bf ? kScanTolBf16 : kF32Tol, gate_tol = bf ? kScanTolBf16 : 1e-4;
    const std::string op = "gated_delta " + shape;

    poison({{vs, dt}, {ss, DType::F32}});
    const GatedDeltaOut out = gated_delta_forward(q, k, v, g, beta, s0, scale, c.gpu_chunk);
    EXPECT_EQ(out.final_state.dtype(), DType::F32);
    expect_close(op, "o", out.o, ref.o, o_tol);
    expect_close(op, "final", out.final_state, ref.final_state, state_tol);
    if (!backward) continue;

    const Tensor d_o = up(x.d_o, dt), dsf = up_or_none(x.dsf, bf ? DType::BF16 : DType::F32);
    poison({{qs, dt}, {vs, dt}, {gs, DType::F32}, {ss, DType::F32}});
    const GatedDeltaGrads gr =
        gated_delta_backward(q, k, v, g, beta, s0, scale, d_o, dsf, c.gpu_chunk);
    expect_close(op, "dq", gr.dq, rg.dq, g_tol);
    expect_close(op, "dk", gr.dk, rg.dk, g_tol);
    expect_close(op, "dv", gr.dv, rg.dv, g_tol);
    expect_close(op, "dg", gr.dg, rg.dg, gate_tol);
    expect_close(op, "dbeta", gr.dbeta, rg.dbeta, gate_tol);
    ASSERT_EQ(gr.dinitial_state.defined(), c.s0);
    if (c.s0) expect_close(op, "ds0", gr.dinitial_state, rg.dinitial_state, state_tol);

    // The forward keeping its intermediates and the backward reading them instead of recomputing
    // (what GdnMixer does in training): the same bits as the two calls above.
    poison({{vs, dt}, {ss, DType::F32}});
    const GatedDeltaOut kept =
        gated_delta_forward(q, k, v, g, beta, s0, scale, c.gpu_chunk, /*keep_for_backward=*/true);
    ASSERT_TRUE(kept.saved.defined());
    expect_equal(op + " kept", "o", kept.o, out.o.to(Device::CPU).to(DType::F32));
    expect_equal(op + " kept", "final", kept.final_state, out.final_state.to(Device::CPU).to(DType::F32));
    poison({{qs, dt}, {vs, dt}, {gs, DType::F32}, {ss, DType::F32}});
    const GatedDeltaGrads gk = gated_delta_backward(q, k, v, g, beta, s0, scale, d_o, dsf,
                                                    c.gpu_chunk, kept.saved);
    expect_equal(op + " kept", "dq", gk.dq, gr.dq.to(Device::CPU).to(DType::F32));
    expect_equal(op + " kept", "dk", gk.dk, gr.dk.to(Device::CPU).to(DType::F32));
    expect_equal(op + " kept", "dv", gk.dv, gr.dv.to(Device::CPU).to(DType::F32));
    expect_equal(op + " kept", "dg", gk.dg, gr.dg.to(Device::CPU).to(DType::F32));
    expect_equal(op + " kept", "dbeta", gk.dbeta, gr.dbeta.to(Device::CPU).to(DType::F32));
    if (c.s0) expect_equal(op + " kept", "ds0", gk.dinitial_state, gr.dinitial_state.to(Device::CPU).to(DType::F32));
  }
}

// Decode: `steps` consecutive steps from a random f32 state, o_t and the state after each.
void check_step(int64_t B, int64_t H, int64_t K, int64_t V, int steps, uint64_t seed) {
  const double scale = gated_delta_default_scale(K);
  const std::string op = "gated_delta_step B" + std::to_string(B) + " H" + std::to_string(H) +
                         " K" + std::to_string(K) + " V" + std::to_string(V);
  for (DType dt : kDtypes) {
    Tensor ref_state = input({B, H, K, V}, seed, DType::BF16, 0.5);
    Tensor state = up(ref_state, DType::F32);
    for (int s = 0; s < steps; ++s) {
      const uint64_t sd = seed + 10 * (s + 1);
      const Tensor q = testing::unit_rows({B, H, K}, sd + 1, DType::F32).to(dt).to(DType::F32);
      const Tensor k = testing::unit_rows({B, H, K}, sd + 2, DType::F32).to(dt).to(DType::F32);
      const Tensor v = input({B, H, V}, sd + 3, dt);
      const Tensor g = input_uniform({B, H}, sd + 4, dt, -0.5, -0.001);
      const Tensor beta = input_uniform({B, H}, sd + 5, dt, 0.05, 0.95);
      const Tensor o_ref = gated_delta_step(q, k, v, g, beta, scale, ref_state);
      poison({{{B, H, V}, dt}});
      const Tensor o =
          gated_delta_step(up(q, dt), up(k, dt), up(v, dt), up(g, dt), up(beta, dt), scale, state);
      expect_close(op, "o_t", o, o_ref, out_tol(dt));
      expect_close(op, "state", state, ref_state, kF32Tol);
    }
  }
}

// The training shape of the 1.5B GDN preset (d 2048: H = 0.75 d / 64 = 24 heads, K 64, V 128),
// partial last chunks, T = 1, long T, odd dims (V not a multiple of the 32-column tiles), chunk 0,
// and fla's other benchmark shape K 128, V 256 (bf16) with full and partial chunks.
TEST(CudaParity, GatedDelta) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {4, 2048, 24, 64, 128, 64, false, false, false, 64},
      {2, 1000, 3, 64, 128, 64, true, true, true, 64},
      {3, 100, 2, 64, 128, 64, true, false, false, 64},
      {2, 1, 4, 64, 128, 64, true, true, false, 64},
      {1, 8192, 24, 64, 128, 64, false, true, false, 64},
      {1, 77, 5, 48, 80, 32, true, true, true, 32},
      {2, 130, 3, 64, 128, 64, false, false, false, 0},
      {2, 256, 2, 128, 256, 64, true, true, false, 64, true},
      {1, 200, 2, 128, 256, 64, false, true, true, 64, true},
  };
  uint64_t seed = 7000;
  for (const GdnCase& c : cases) check_case(c, seed += 100, true);
}

TEST(CudaParity, GatedDeltaStep) {
  AMOR_REQUIRE_GPU();
  check_step(1, 24, 64, 128, 3, 7500);
  check_step(16, 24, 64, 128, 3, 7600);
  check_step(3, 5, 48, 80, 2, 7700);
}

// Small shapes for the emulator (tests/cuda/emu): several chunks with a partial last one, V tiles
// with a partial last one, T = 1, with and without states, bf16 gates and states, the preset's
// K = 64, V = 128 with chunk_size 0 (run as chunks of 64) and with both states, bf16 gates and a
// partial fourth chunk (every tensor-core tile shape of the preset), the same with full chunks
// only (T 128) and K 128, V 256 in one chunk (the kernels compiled for the presets' shapes,
// gated_delta_cuda_common.cuh's Shape), K = 128 in bf16 (the
// register-state passes' largest state, V = 32: warps of a block past V; f32 tiles of K = 128 do
// not fit the shared memory). The last two take the
// kernels' fallbacks: K, V not multiples of 8 (element-wise tile copies instead of 16-byte
// cp.async, no ldmatrix) and odd K, V, chunk (odd row strides: no paired fragment loads or
// stores, the concatenated products' seam inside a pair).
TEST(CudaParity, GatedDeltaSmall) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {2, 37, 2, 16, 40, 16, true, true, true, 16},
      {1, 20, 1, 8, 8, 8, false, false, false, 8},
      {1, 1, 2, 16, 24, 16, true, true, false, 16},
      {1, 77, 2, 48, 80, 32, true, true, true, 32},
      {1, 130, 1, 64, 128, 64, false, false, false, 0},
      {1, 200, 1, 64, 128, 64, true, true, true, 64},
      {1, 128, 1, 64, 128, 64, true, true, false, 64},
      {1, 70, 1, 128, 32, 64, true, true, true, 64, true},
      {1, 64, 1, 128, 256, 64, true, false, false, 64, true},
      {1, 50, 2, 12, 36, 16, true, true, true, 16},
      {2, 29, 1, 7, 9, 13, true, true, false, 13},
  };
  uint64_t seed = 7800;
  for (const GdnCase& c : cases) check_case(c, seed += 100, true);
}

// K 128, V 256 (the presets' compiled shape) over several chunks: the backward's sequential pass
// carries dS' across chunks in registers (gated_delta_state_bwd_cuda.cu: 16 warps, a block per
// head), with a partial last chunk (the runtime-shape kernels) and with full chunks only.
TEST(CudaParity, GatedDeltaSmallK128) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {1, 150, 1, 128, 256, 64, true, true, true, 64, true},
      {1, 128, 1, 128, 256, 64, false, true, false, 64, true},
  };
  uint64_t seed = 8100;
  for (const GdnCase& c : cases) check_case(c, seed += 100, true);
}

// The register passes of the backward at K 64 (8 warps of the wide state pass, bwd_qk's 8-warp
// kernel) and K 48 with chunks of 32 (5 warps, columns of K past the last n16 block in bwd_qk),
// several chunks with a partial last one, bf16 only (the f32 path takes other kernels).
TEST(CudaParity, GatedDeltaSmallRegBwd) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {1, 200, 1, 64, 128, 64, true, true, true, 64, true},
      {1, 77, 2, 48, 80, 32, true, true, true, 32, true},
  };
  uint64_t seed = 8300;
  for (const GdnCase& c : cases) check_case(c, seed += 100, true);
}

// The fused forward's shapes (bf16, chunk 64, K 64 or 128, V a multiple of 64;
// gated_delta_fwd_fused_cuda.cu), forward only, for a quick emulator run: partial last chunks
// (T not a multiple of 64), both states and gate dtypes, two V blocks per head, several heads.
// Also the forward that keeps the backward's intermediates (another prepare and the state pass
// besides the fused pass): the same bits of o and the final state.
TEST(CudaParity, GatedDeltaSmallFusedFwd) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {1, 130, 1, 64, 128, 64, true, false, true, 64, true},
      {2, 64, 2, 64, 64, 64, false, false, false, 64, true},
      {1, 100, 1, 128, 128, 64, true, false, false, 64, true},
  };
  uint64_t seed = 8100;
  for (const GdnCase& c : cases) {
    check_case(c, seed += 100, false);
    const GdnInputs x = make_inputs(c, seed);
    const DType gdt = c.gates_bf16 ? DType::BF16 : DType::F32;
    const Tensor q = up(x.q, DType::BF16), k = up(x.k, DType::BF16), v = up(x.v, DType::BF16);
    const Tensor g = up(x.g, gdt), beta = up(x.beta, gdt), s0 = up_or_none(x.s0, gdt);
    const double scale = gated_delta_default_scale(c.K);
    const GatedDeltaOut out = gated_delta_forward(q, k, v, g, beta, s0, scale, c.gpu_chunk);
    const GatedDeltaOut kept = gated_delta_forward(q, k, v, g, beta, s0, scale, c.gpu_chunk, true);
    const std::string op = "gated_delta fused K" + std::to_string(c.K) + " T" +
                           std::to_string(c.T) + " kept";
    expect_equal(op, "o", kept.o, out.o.to(Device::CPU).to(DType::F32));
    expect_equal(op, "final", kept.final_state, out.final_state.to(Device::CPU).to(DType::F32));
  }
}

// The forward keeping its intermediates through the fused pass (gated_delta_fwd_fused_cuda.cu:
// S and Vn stored by the pass, and the backward's recomputation the same way) with several batch
// entries and heads (the [BH, NC, K, V] and [BH, T, V] offsets), two V blocks per head at K 64, a
// partial last chunk, both states, bf16 gates; and K 128 with two heads.
TEST(CudaParity, GatedDeltaSmallFusedKeep) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {2, 100, 2, 64, 128, 64, true, true, true, 64, true},
      {1, 80, 2, 128, 128, 64, false, true, false, 64, true},
  };
  uint64_t seed = 8500;
  for (const GdnCase& c : cases) check_case(c, seed += 100, true);
}

TEST(CudaParity, GatedDeltaSmallStep) {
  AMOR_REQUIRE_GPU();
  check_step(2, 3, 16, 40, 2, 7900);
}

TEST(CudaParity, GatedDeltaSmallErrors) {
  AMOR_REQUIRE_GPU();
  const GdnCase c{1, 10, 1, 8, 8, 8, false, false, false, 8};
  const GdnInputs x = make_inputs(c, 8000);
  const Tensor q = up(x.q, DType::BF16), k = up(x.k, DType::BF16), v = up(x.v, DType::BF16);
  const Tensor g = up(x.g, DType::F32), beta = up(x.beta, DType::F32);
  // chunk > 64, f64 activations, g and beta of different dtypes, a bf16 decode state.
  EXPECT_NE(error_of([&] {
              gated_delta_forward(q, k, v, g, beta, Tensor(), 0.3, 65);
            }).find("chunk_size is 65"),
            std::string::npos);
  const Tensor q64 = x.q.to(DType::F64).to(Device::CUDA);
  EXPECT_NE(error_of([&] {
              gated_delta_forward(q64, q64, x.v.to(DType::F64).to(Device::CUDA), g, beta, Tensor(),
                                  0.3, 8);
            }).find("gated_delta_forward"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              gated_delta_forward(q, k, v, g, up(x.beta, DType::BF16), Tensor(), 0.3, 8);
            }).find("different dtypes"),
            std::string::npos);
  Tensor bf_state = up(input({1, 1, 8, 8}, 8001, DType::BF16), DType::BF16);
  const Tensor qt = up(input({1, 1, 8}, 8002, DType::BF16), DType::BF16);
  const Tensor gt = up(input_uniform({1, 1}, 8003, DType::F32, -0.5, -0.01), DType::F32);
  EXPECT_NE(error_of([&] { gated_delta_step(qt, qt, qt, gt, gt, 0.3, bf_state); }).find("'state'"),
            std::string::npos);
  // A `saved` buffer that is not the forward's for these shapes (one element short).
  const Tensor d_o = up(x.d_o, DType::BF16);
  const Tensor saved = gated_delta_forward(q, k, v, g, beta, Tensor(), 0.3, 8, true).saved;
  const Tensor short_saved = Tensor::empty({saved.numel() - 1}, DType::F32, Device::CUDA);
  EXPECT_NE(error_of([&] {
              gated_delta_backward(q, k, v, g, beta, Tensor(), 0.3, d_o, Tensor(), 8, short_saved);
            }).find("saved must be the f32 buffer"),
            std::string::npos);
}

}  // namespace
}  // namespace amor::parity

namespace amor::parity {
namespace {

// The second form of the fused forward (gated_delta_fwd_fused2_cuda.cu: a warp per 16 columns of
// V) at its block shapes, with the backward on its kept and recomputed intermediates: K 128, V 256
// (16 warps, a block per head) over two batch entries and heads with a partial second chunk and
// both states; K 64, V 192 (three blocks of 4 warps per head) over three heads and three chunks.
TEST(CudaParity, GatedDeltaSmallFused2) {
  AMOR_REQUIRE_GPU();
  const GdnCase cases[] = {
      {2, 70, 2, 128, 256, 64, true, true, true, 64, true},
      {1, 150, 3, 64, 192, 64, false, true, false, 64, true},
  };
  uint64_t seed = 8700;
  for (const GdnCase& c : cases) check_case(c, seed += 100, true);
}

}  // namespace
}  // namespace amor::parity
