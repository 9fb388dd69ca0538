// CUDA == cpu reference for the Mamba2 SSD scan: the chunked forward (y, final state), the
// backward (dx, ddt, dA, dB, dC, dD, dinitial_state) and the decode step.
//
// Inputs as a Mamba2 layer makes them: x, B, C ~ N(0, s) rounded to the storage dtype; dt in
// [1e-3, 0.1] (softplus outputs at mamba_ssm's dt init), A in [-16, -1] (A = -exp(A_log) with
// A_log = log U[1, 16]), D ~ N(0, 1), states ~ N(0, 1); dt, A, D and the states are f32 on cuda.
// The cpu reference runs the same chunked algorithm in f32 on the same values.
//
// Tolerances on rms(a - b) / rms(b). bf16: y 5e-3 and dx, dB, dC, dinitial_state 1e-2 (design
// §2's outputs and gradients); the final state, ddt and dA, the scan's state and gate gradients,
// 2e-2. f32: 1e-5 for y and the final state; 1e-4 for the gradients, which are long sums with
// cancellation (dA and dD add B*T terms of both signs; ddt and dA go through a reverse cumsum of
// dcum, itself a difference of decayed products), so a few ulps of expf per term show up.
//
// The bf16 path runs by spans of chunks where the state fits (ssd_state_tc_cuda.cu): the small
// tests cover spans of 2 chunks (several spans, partial last span and chunk), SsdRealistic spans
// of 8, SsdSmallSpanLengths spans of 1 and 3 chunks, SsdSpanWindows of 64; SsdSmallPerChunkPath
// the per-chunk bf16 kernels.
//
// Every case also runs the forward with keep_for_backward and the backward on its `saved`, which
// must give the same bits as the recomputing pair (y, final state and every gradient).
//
// CudaParity.SsdSmall* are small enough for the CPU emulator (tests/cuda/emu).
#include <string>

#include "kernels/ssd/ssd.h"
#if AMOR_HAVE_CUDA
#include "kernels/ssd/ssd_cuda.h"  // the span knobs (CUDA builds only; without CUDA every test skips)
#endif
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

const DType kDtypes[] = {DType::F32, DType::BF16};

struct SsdCase {
  int64_t B, T, H, P, G, N, chunk;
  bool h0, dhT;  // with an initial state / a gradient of the final state
};

std::string name_of(const SsdCase& c) {
  return "ssd B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " H" + std::to_string(c.H) +
         " P" + std::to_string(c.P) + " G" + std::to_string(c.G) + " N" + std::to_string(c.N) +
         " Q" + std::to_string(c.chunk) + (c.h0 ? " h0" : "") + (c.dhT ? " dhT" : "");
}

double out_tol_of(DType d) { return d == DType::BF16 ? 5e-3 : 1e-5; }
double grad_tol_of(DType d) { return d == DType::BF16 ? 1e-2 : 1e-4; }
double state_tol_of(DType d) { return d == DType::BF16 ? 2e-2 : 1e-5; }
double gate_tol_of(DType d) { return d == DType::BF16 ? 2e-2 : 1e-4; }

void check_scan(const SsdCase& c, uint64_t seed) {
  const Shape xs{c.B, c.T, c.H, c.P}, bcs{c.B, c.T, c.G, c.N}, dts{c.B, c.T, c.H};
  const Shape ss{c.B, c.H, c.P, c.N}, hs{c.H};
  const std::string op = name_of(c);
  for (DType d : kDtypes) {
    Tensor x = input(xs, ++seed, d), Bm = input(bcs, ++seed, d, 0.5);
    Tensor Cm = input(bcs, ++seed, d, 0.5), dy = input(xs, ++seed, d);
    Tensor dt = input_uniform(dts, ++seed, DType::F32, 1e-3, 0.1);
    Tensor A = input_uniform(hs, ++seed, DType::F32, -16.0, -1.0);
    Tensor D = input(hs, ++seed, DType::F32);
    Tensor h0 = c.h0 ? input(ss, ++seed, DType::F32) : Tensor();
    Tensor dhT = c.dhT ? input(ss, ++seed, DType::F32) : Tensor();
    auto f32 = [](const Tensor& t) { return t.defined() ? up(t, DType::F32) : Tensor(); };

    poison({{xs, d}, {ss, DType::F32}});
    SsdOut g = ssd_forward(up(x, d), f32(dt), f32(A), up(Bm, d), up(Cm, d), f32(D), f32(h0),
                           c.chunk);
    SsdOut r = ssd_forward(x, dt, A, Bm, Cm, D, h0, c.chunk);
    expect_close(op + " fwd", "y", g.y, r.y, out_tol_of(d));
    expect_close(op + " fwd", "state", g.final_state, r.final_state, state_tol_of(d));

    poison({{xs, d}, {dts, DType::F32}, {hs, DType::F32}, {bcs, d}, {ss, DType::F32}});
    SsdGrads gg = ssd_backward(up(x, d), f32(dt), f32(A), up(Bm, d), up(Cm, d), f32(D), f32(h0),
                               up(dy, d), f32(dhT), c.chunk);
    SsdGrads rr = ssd_backward(x, dt, A, Bm, Cm, D, h0, dy, dhT, c.chunk);
    expect_close(op + " bwd", "dx", gg.dx, rr.dx, grad_tol_of(d));
    expect_close(op + " bwd", "ddt", gg.ddt, rr.ddt, gate_tol_of(d));
    expect_close(op + " bwd", "dA", gg.dA, rr.dA, gate_tol_of(d));
    expect_close(op + " bwd", "dB", gg.dB, rr.dB, grad_tol_of(d));
    expect_close(op + " bwd", "dC", gg.dC, rr.dC, grad_tol_of(d));
    expect_close(op + " bwd", "dD", gg.dD, rr.dD, grad_tol_of(d));
    if (c.h0) {
      expect_close(op + " bwd", "dh0", gg.dinitial_state, rr.dinitial_state, grad_tol_of(d));
    } else {
      EXPECT_FALSE(gg.dinitial_state.defined());
    }

    // The forward keeping its intermediates and the backward reading them instead of recomputing
    // (what Mamba2Mixer does in training): the same bits as the two calls above.
    const std::string kop = op + " kept";
    poison({{xs, d}, {ss, DType::F32}});
    SsdOut gk = ssd_forward(up(x, d), f32(dt), f32(A), up(Bm, d), up(Cm, d), f32(D), f32(h0),
                            c.chunk, /*keep_for_backward=*/true);
    ASSERT_TRUE(gk.saved.defined());
    expect_equal(kop, "y", gk.y, down(g.y));
    expect_equal(kop, "state", gk.final_state, down(g.final_state));
    poison({{xs, d}, {dts, DType::F32}, {hs, DType::F32}, {bcs, d}, {ss, DType::F32}});
    SsdGrads kk = ssd_backward(up(x, d), f32(dt), f32(A), up(Bm, d), up(Cm, d), f32(D), f32(h0),
                               up(dy, d), f32(dhT), c.chunk, gk.saved);
    expect_equal(kop, "dx", kk.dx, down(gg.dx));
    expect_equal(kop, "ddt", kk.ddt, down(gg.ddt));
    expect_equal(kop, "dA", kk.dA, down(gg.dA));
    expect_equal(kop, "dB", kk.dB, down(gg.dB));
    expect_equal(kop, "dC", kk.dC, down(gg.dC));
    expect_equal(kop, "dD", kk.dD, down(gg.dD));
    ASSERT_EQ(kk.dinitial_state.defined(), c.h0);
    if (c.h0) expect_equal(kop, "dh0", kk.dinitial_state, down(gg.dinitial_state));
  }
}

// Decode: `steps` steps on one state, on both devices, compared after each.
void check_steps(int64_t B, int64_t H, int64_t P, int64_t G, int64_t N, int steps,
                 uint64_t seed) {
  const std::string op = "ssd_step B" + std::to_string(B) + " H" + std::to_string(H) + " P" +
                         std::to_string(P) + " G" + std::to_string(G) + " N" + std::to_string(N);
  for (DType d : kDtypes) {
    Tensor A = input_uniform({H}, ++seed, DType::F32, -16.0, -1.0);
    Tensor D = input({H}, ++seed, DType::F32);
    Tensor state = input({B, H, P, N}, ++seed, DType::F32);
    Tensor gstate = up(state, DType::F32);
    Tensor gA = up(A, DType::F32), gD = up(D, DType::F32);
    for (int s = 0; s < steps; ++s) {
      Tensor x = input({B, H, P}, ++seed, d), Bm = input({B, G, N}, ++seed, d, 0.5);
      Tensor Cm = input({B, G, N}, ++seed, d, 0.5);
      Tensor dt = input_uniform({B, H}, ++seed, DType::F32, 1e-3, 0.1);
      poison({{{B, H, P}, d}});
      Tensor gy = ssd_step(up(x, d), up(dt, DType::F32), gA, up(Bm, d), up(Cm, d), gD, gstate);
      Tensor ry = ssd_step(x, dt, A, Bm, Cm, D, state);
      const std::string at = op + " step " + std::to_string(s);
      expect_close(at, "y", gy, ry, out_tol_of(d));
      expect_close(at, "state", gstate, state, kF32Tol);
    }
  }
}

// ---- small shapes (also run in the emulator)

// Three chunks, the last one partial; two groups; both optional states; then without them; then
// 10 heads in a group (the bf16 dB, dC are summed over splits of 8 heads: a full and a short one).
TEST(CudaParity, SsdSmallChunks) {
  AMOR_REQUIRE_GPU();
  check_scan({2, 37, 4, 8, 2, 16, 16, true, true}, 7000);
  check_scan({1, 37, 3, 5, 1, 12, 16, false, false}, 7100);
  check_scan({1, 40, 10, 8, 1, 16, 16, true, true}, 7150);
}

// T = 1 (one one-step chunk), T shorter than the chunk, an odd chunk size.
TEST(CudaParity, SsdSmallShortSequences) {
  AMOR_REQUIRE_GPU();
  check_scan({3, 1, 2, 8, 1, 16, 64, true, true}, 7200);
  check_scan({2, 20, 2, 8, 2, 16, 64, false, true}, 7300);
  check_scan({1, 50, 2, 6, 1, 10, 7, true, false}, 7400);
}

// The realistic head sizes (P = 64, N = 128) over two chunks: the kernels compiled for that shape
// (ssd_tile.cuh's Shape), with a short last chunk (T 70) and with full chunks only (T 128).
TEST(CudaParity, SsdSmallRealisticHead) {
  AMOR_REQUIRE_GPU();
  check_scan({1, 70, 2, 64, 1, 128, 64, true, true}, 7500);
  check_scan({1, 128, 2, 64, 1, 128, 64, true, true}, 7510);
}

// Chunks of 128 and 96 (several warp tiles per warp in the bf16 kernels), head sizes that are not
// multiples of 16 (padded tiles) and P = 40 (16-byte loads of padded rows).
TEST(CudaParity, SsdSmallLongChunks) {
  AMOR_REQUIRE_GPU();
  check_scan({1, 300, 2, 40, 1, 24, 128, true, true}, 7800);
  check_scan({2, 97, 3, 16, 1, 48, 96, false, true}, 7900);
}

// The bf16 per-chunk kernels, which run where a state does not fit the span kernels' register
// tiles (N = 256 here) and, under ssd_set_spans(false), everywhere (the realistic head).
TEST(CudaParity, SsdSmallPerChunkPath) {
  AMOR_REQUIRE_GPU();
  check_scan({1, 70, 2, 64, 1, 256, 32, true, true}, 7950);
  struct SpansOff {  // back on however the test ends
#if AMOR_HAVE_CUDA
    SpansOff() { cuda::ssd_set_spans(false); }
    ~SpansOff() { cuda::ssd_set_spans(true); }
#endif
  } off;
  check_scan({1, 70, 2, 64, 1, 128, 64, true, true}, 7960);
}

// Sets the span path's chunks per span for a scope, then back to the launchers' choice.
struct SpanLen {
#if AMOR_HAVE_CUDA
  explicit SpanLen(int m) { cuda::ssd_set_span_len(m); }
  ~SpanLen() { cuda::ssd_set_span_len(0); }
#else
  explicit SpanLen(int) {}
#endif
};

// Spans of one chunk and of three (ssd_set_span_len; the last span short), on the realistic head.
TEST(CudaParity, SsdSmallSpanLengths) {
  AMOR_REQUIRE_GPU();
  {
    SpanLen one(1);
    check_scan({1, 50, 2, 16, 1, 32, 16, true, true}, 7970);
  }
  SpanLen three(3);
  check_scan({2, 150, 3, 64, 1, 128, 32, true, true}, 7980);
}

TEST(CudaParity, SsdSmallStep) {
  AMOR_REQUIRE_GPU();
  check_steps(2, 4, 8, 2, 16, 3, 7600);
  check_steps(1, 2, 64, 1, 128, 2, 7700);
}

TEST(CudaParity, SsdSmallErrors) {
  AMOR_REQUIRE_GPU();
  Tensor x = up(input({1, 4, 2, 8}, 1, DType::BF16), DType::BF16);
  Tensor bc = up(input({1, 4, 1, 16}, 2, DType::BF16), DType::BF16);
  Tensor dt32 = up(input_uniform({1, 4, 2}, 3, DType::F32, 0.01, 0.1), DType::F32);
  Tensor h32 = up(input({2}, 4, DType::F32), DType::F32);
  Tensor dt16 = up(input_uniform({1, 4, 2}, 3, DType::F32, 0.01, 0.1), DType::BF16);
  EXPECT_EQ(error_of([&] { ssd_forward(x, dt16, h32, bc, bc, h32, Tensor(), 64); }),
            "ssd_forward: argument 'dt' is bf16[1,4,2]@cuda; on cuda it must be f32 (decays, "
            "skip weights and states are f32 on cuda)");
  EXPECT_EQ(error_of([&] { ssd_forward(x, dt32, h32, bc, bc, h32, Tensor(), 0); }),
            "ssd_forward: chunk_size is 0; on cuda it must be 1..128 (0, the step-by-step "
            "recurrence, is the cpu reference's)");
  // Chunks whose tiles exceed a block's shared memory are refused, naming the sizes.
  Tensor xl = up(input({1, 128, 2, 64}, 5, DType::BF16), DType::BF16);
  Tensor bcl = up(input({1, 128, 1, 128}, 6, DType::BF16), DType::BF16);
  Tensor dtl = up(input_uniform({1, 128, 2}, 7, DType::F32, 0.01, 0.1), DType::F32);
  const std::string big = error_of([&] { ssd_forward(xl, dtl, h32, bcl, bcl, h32, Tensor(), 128); });
  EXPECT_NE(big.find("ssd_forward: x bf16[1,128,2,64]@cuda with d_state 128 and chunk_size 128 "
                     "needs"),
            std::string::npos)
      << big;
  Tensor x64 = up(input({1, 4, 2, 8}, 1, DType::F32), DType::F64);
  EXPECT_EQ(error_of([&] { ssd_forward(x64, dt32, h32, bc, bc, h32, Tensor(), 64); }),
            "ssd_forward: argument 'x' is f64[1,4,2,8]@cuda; on cuda this op takes f32 or bf16");
  // A `saved` buffer that is not the forward's for these inputs (one element short; bf16 by
  // spans, then f32): refused, naming the size it must have.
  for (DType d : kDtypes) {
    Tensor xd = up(input({1, 40, 2, 8}, 11, d), d), bcd = up(input({1, 40, 1, 16}, 12, d), d);
    Tensor dtd = up(input_uniform({1, 40, 2}, 13, DType::F32, 0.01, 0.1), DType::F32);
    const Tensor saved = ssd_forward(xd, dtd, h32, bcd, bcd, h32, Tensor(), 16, true).saved;
    ASSERT_TRUE(saved.defined());
    const Tensor short_saved = Tensor::empty({saved.numel() - 1}, DType::F32, Device::CUDA);
    const std::string err = error_of([&] {
      ssd_backward(xd, dtd, h32, bcd, bcd, h32, Tensor(), xd, Tensor(), 16, short_saved);
    });
    EXPECT_NE(err.find("ssd_backward: saved must be the f32 buffer that "
                       "ssd_forward(keep_for_backward) returned for these inputs (" +
                       std::to_string(saved.numel()) + " elements on their device)"),
              std::string::npos)
        << err;
  }
  // Without keep_for_backward nothing is kept.
  EXPECT_FALSE(ssd_forward(x, dt32, h32, bc, bc, h32, Tensor(), 64).saved.defined());
}

// ---- realistic and awkward shapes (GPU only: too slow for the emulator)

// A Mamba2 layer at 1.5B scale (d_inner 4096 = 64 heads of 64, N = 128), B*T = 8192 tokens.
TEST(CudaParity, SsdRealistic) {
  AMOR_REQUIRE_GPU();
  check_scan({4, 2048, 64, 64, 1, 128, 64, true, true}, 8000);
}

// T not a multiple of the chunk, chunk 32 (at N = 128 a chunk of 128 needs more shared memory
// than a block has), G = 2, without the optional states, T = 1.
TEST(CudaParity, SsdAwkward) {
  AMOR_REQUIRE_GPU();
  check_scan({2, 100, 8, 64, 1, 128, 64, false, false}, 8100);
  check_scan({1, 1000, 8, 64, 1, 128, 32, true, true}, 8200);
  check_scan({3, 1000, 6, 64, 2, 128, 64, true, false}, 8300);
  check_scan({3, 1, 16, 64, 2, 128, 64, true, true}, 8400);
}

// Spans of 64 one-step chunks, 18 of them: more than one window (1024 chunks) of span_passing's
// decays, forward and reverse. Passed in the emulator once (10 minutes there: 1100 chunks).
TEST(CudaParity, SsdSpanWindows) {
  AMOR_REQUIRE_GPU();
  SpanLen longest(64);
  check_scan({1, 1100, 1, 4, 1, 8, 1, true, true}, 7990);
}

TEST(CudaParity, SsdLong) {
  AMOR_REQUIRE_GPU();
  check_scan({1, 8192, 16, 64, 1, 128, 64, true, true}, 8500);
}

TEST(CudaParity, SsdStep) {
  AMOR_REQUIRE_GPU();
  check_steps(16, 64, 64, 1, 128, 4, 8600);
  check_steps(3, 6, 64, 2, 128, 3, 8700);
}

}  // namespace
}  // namespace amor::parity
