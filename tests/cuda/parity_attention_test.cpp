// CUDA == cpu reference for causal GQA attention with the optional per-query gate, forward (o,
// lse) and backward (dq, dk, dv): the bf16 tensor-core kernels (head dim 64 and 128) and the f32
// SIMT kernels, at MHA and GQA, Tq = Tk and Tq < Tk (decode: Tq = 1), sequence lengths that are
// and are not multiples of the kernels' tiles, and gates (AMOR's ~22% firing, all off, all on).
//
// CudaParity.AttentionSmall* are small enough for the CPU emulator (tests/cuda/emu); the realistic
// shapes are in CudaParity.Attention* (GPU only). Sequence lengths >= 2048 use few heads: every
// (b, h) pair is an independent block of the same code, while the cpu reference costs
// O(B H T^2 D).
//
// Tolerances (rms(a - b) / rms(b)): bf16 o <= 5e-3, gradients <= 1e-2 (design §2). lse is f32 on
// both sides: the scores are dot products of the same bf16 (or f32) values accumulated in f32 (a
// few ulps of |s| ~ 1) and lse ~ 1 .. 9, so 1e-5 holds with room. The f32 path's results come from
// sums over up to Tk terms in a different order than the cpu's (and dS = P (dP - delta) cancels),
// so the f32 tolerance grows like sqrt(Tk): 1e-5 up to Tk = 256, 4e-5 at Tk = 4096.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/attention/attention.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

// Spread: exactly `fired` rows of each sequence fire, row 0 among them, the rest evenly spaced
// (fired counts that are and are not multiples of the kernels' 128-row tiles).
enum class Gate { None, Amor, AllOff, AllOn, Spread };

struct AttnCase {
  int64_t B, Tq, Tk, H, Hkv, D;
  Gate gate;
  int64_t fired = 0;  // Gate::Spread
};

std::string name(const AttnCase& c) {
  const char* g[] = {"", " gate 22%", " gate all off", " gate all on", " gate fires "};
  return "attention B" + std::to_string(c.B) + " Tq" + std::to_string(c.Tq) + " Tk" +
         std::to_string(c.Tk) + " H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " D" +
         std::to_string(c.D) + g[int(c.gate)] +
         (c.gate == Gate::Spread ? std::to_string(c.fired) : std::string());
}

// u8 [B, Tq]: AMOR's gate fires on ~22% of the rows (a fixed LCG, so the test is reproducible).
Tensor make_gate(const AttnCase& c, uint64_t seed) {
  Tensor g = Tensor::empty({c.B, c.Tq}, DType::U8);
  uint8_t* p = g.data<uint8_t>();
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < c.B * c.Tq; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = double(s >> 11) / double(1ull << 53);
    p[i] = c.gate == Gate::AllOn ? 1 : c.gate == Gate::AllOff ? 0 : (u < 0.22 ? 1 : 0);
    if (c.gate == Gate::Spread) {  // row r fires where floor(r fired / Tq) steps (and r = 0)
      const int64_t r = i % c.Tq;
      p[i] = r == 0 || (r * c.fired) / c.Tq != ((r - 1) * c.fired) / c.Tq;
    }
  }
  return g;
}

double f32_tol(const AttnCase& c) { return 1e-5 * std::max(1.0, std::sqrt(double(c.Tk) / 256.0)); }

void check_case(const AttnCase& c, DType dt, uint64_t seed) {
  const std::string op = name(c);
  const Shape qs{c.B, c.Tq, c.H, c.D}, ks{c.B, c.Tk, c.Hkv, c.D}, ls{c.B, c.H, c.Tq};
  Tensor q = input(qs, seed + 1, dt), k = input(ks, seed + 2, dt), v = input(ks, seed + 3, dt);
  Tensor dout = input(qs, seed + 4, dt);
  Tensor gate, ggate;
  if (c.gate != Gate::None) {
    gate = make_gate(c, seed + 5);
    ggate = gate.to(Device::CUDA);
  }
  const double otol = dt == DType::F32 ? f32_tol(c) : out_tol(dt);
  const double gtol = dt == DType::F32 ? f32_tol(c) : grad_tol(dt);

  AttentionOutput r = attention_forward(q, k, v, gate);
  poison({{qs, dt}, {ls, DType::F32}});
  AttentionOutput g = attention_forward(up(q, dt), up(k, dt), up(v, dt), ggate);
  EXPECT_EQ(g.lse.dtype(), DType::F32);
  EXPECT_EQ(g.o.dtype(), dt);
  expect_close(op, "o", g.o, r.o, otol);
  expect_close(op, "lse", g.lse, r.lse, std::max(kF32Tol, dt == DType::F32 ? otol : 0.0));
  if (c.gate == Gate::AllOff) {  // exactly zero, not merely close
    expect_equal(op, "o (all off)", g.o, r.o);
    expect_equal(op, "lse (all off)", g.lse, r.lse);
  }

  AttentionGrads rg = attention_backward(q, k, v, gate, r.o, r.lse, dout);
  poison({{qs, dt}, {ks, dt}});
  AttentionGrads gg = attention_backward(up(q, dt), up(k, dt), up(v, dt), ggate, g.o, g.lse,
                                         up(dout, dt));
  EXPECT_EQ(gg.dk.dtype(), dt);
  expect_close(op, "dq", gg.dq, rg.dq, gtol);
  expect_close(op, "dk", gg.dk, rg.dk, gtol);
  expect_close(op, "dv", gg.dv, rg.dv, gtol);
  if (c.gate == Gate::AllOff) {
    expect_equal(op, "dq (all off)", gg.dq, rg.dq);
    expect_equal(op, "dk (all off)", gg.dk, rg.dk);
  }
  if (c.gate == Gate::Amor || c.gate == Gate::Spread) {  // gated-off rows: exactly zero o, dq
    Tensor go = down(g.o), gdq = down(gg.dq);
    const uint8_t* gp = gate.data<uint8_t>();
    const int64_t row = c.H * c.D;
    int64_t bad = 0;
    for (int64_t i = 0; i < c.B * c.Tq; ++i)
      if (!gp[i])
        for (int64_t e = 0; e < row; ++e)
          bad += go.data<float>()[i * row + e] != 0.0f || gdq.data<float>()[i * row + e] != 0.0f;
    EXPECT_EQ(bad, 0) << op << ": nonzero o or dq at gated-off rows";
  }
}

void run_cases(const std::vector<AttnCase>& cases, const std::vector<DType>& dtypes,
               uint64_t seed) {
  for (const AttnCase& c : cases)
    for (DType dt : dtypes) check_case(c, dt, seed += 10);
}

// Emulator-sized: every kernel (tensor-core forward, dq, dk/dv; SIMT; compaction) at tiny shapes
// with tails (17 and 100 are not multiples of 64).
TEST(CudaParity, AttentionSmall) {
  AMOR_REQUIRE_GPU();
  run_cases({{2, 17, 17, 2, 2, 64, Gate::None}, {1, 100, 100, 2, 1, 64, Gate::None}},
            {DType::BF16, DType::F32}, 5000);
}

// Several query and key tiles of the tensor-core kernels (the forward's 128-row blocks, the
// backward's tiles), partial last tiles, head dim 128, and a gate with more than one block of
// firing rows (~22% of 700 rows, two forward blocks): bf16 only (the f32 SIMT kernels have no
// tiles). Tk = Tq + 1 puts the last row of a warp (forward, dq) or of a query step (dk/dv) exactly
// on the first key of a tile (or of a warp's keys): the edge of the kernels' per-warp skipping of
// tiles that lie entirely above the diagonal, which an off-by-one there would get wrong.
TEST(CudaParity, AttentionSmallTiles) {
  AMOR_REQUIRE_GPU();
  run_cases({{1, 300, 300, 2, 1, 64, Gate::None},
             {1, 200, 200, 1, 1, 128, Gate::None},
             {1, 90, 333, 2, 2, 128, Gate::None},
             {1, 100, 101, 2, 1, 64, Gate::None},
             {1, 60, 61, 1, 1, 128, Gate::None},
             {1, 700, 700, 2, 1, 64, Gate::Amor}},
            {DType::BF16}, 5300);
}

TEST(CudaParity, AttentionSmallGate) {
  AMOR_REQUIRE_GPU();
  run_cases({{2, 100, 100, 2, 1, 64, Gate::Amor}, {1, 20, 20, 1, 1, 64, Gate::AllOff},
             {1, 70, 70, 1, 1, 64, Gate::AllOn}},
            {DType::BF16}, 5100);
  run_cases({{2, 40, 40, 2, 1, 64, Gate::Amor}}, {DType::F32}, 5150);
}

// The gated layouts' edges: firing counts one below, at and one above the forward's and dq's
// 128-row tile (a 1-row tile; the balanced layout puts the partial tile first), row 0 firing, two
// sequences, Tk = Tq + 1, head dim 128, a 2-row tile of a 3-tile sequence under GQA, and a single
// firing row (row 0: the position that sees one key).
TEST(CudaParity, AttentionSmallGateEdges) {
  AMOR_REQUIRE_GPU();
  run_cases({{1, 300, 300, 1, 1, 64, Gate::Spread, 127},
             {1, 300, 301, 1, 1, 64, Gate::Spread, 128},
             {2, 200, 200, 1, 1, 64, Gate::Spread, 129},
             {1, 180, 180, 1, 1, 128, Gate::Spread, 129},
             {1, 300, 300, 2, 1, 64, Gate::Spread, 258},
             {1, 40, 40, 1, 1, 64, Gate::Spread, 1}},
            {DType::BF16}, 5400);
}

TEST(CudaParity, AttentionSmallDecode) {
  AMOR_REQUIRE_GPU();
  // Tq < Tk (queries are the last Tq positions), decode (Tq = 1), head dim 128.
  run_cases({{2, 1, 70, 2, 1, 64, Gate::None}, {1, 5, 70, 2, 2, 128, Gate::None},
             {1, 9, 80, 2, 1, 64, Gate::Amor}},
            {DType::BF16, DType::F32}, 5200);
}

// Sets AMOR_ATTENTION_DECODE (and AMOR_ATTENTION_DECODE_SPLITS where given) for a test's scope,
// then restores them: the split-KV decode forward at every Tk, whatever the environment.
class ScopedDecode {
 public:
  explicit ScopedDecode(const char* mode, const char* splits = nullptr) {
    save("AMOR_ATTENTION_DECODE", mode, 0);
    save("AMOR_ATTENTION_DECODE_SPLITS", splits, 1);
  }
  ~ScopedDecode() {
    for (int i = 0; i < 2; ++i) {
      if (had_[i]) {
        setenv(names_[i], old_[i].c_str(), 1);
      } else {
        unsetenv(names_[i]);
      }
    }
  }

 private:
  void save(const char* name, const char* value, int i) {
    const char* old = std::getenv(name);
    names_[i] = name;
    had_[i] = old != nullptr;
    if (had_[i]) old_[i] = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  const char* names_[2] = {};
  bool had_[2] = {};
  std::string old_[2];
};

// The split-KV decode forward (AMOR_ATTENTION_DECODE=split; attention_decode_cuda.cu), emulator
// sized: Tq 1 .. 4 (the query rows of a block: 1, 2, 4 and 8, and 12 rows in two blocks of 8),
// GQA groups of 1 .. 4 heads, head dim 64 and 128, Tk = Tq (row 0 sees one key), ranges that end
// inside a key tile and last ranges whose first keys only some rows see, the gate (22%, all off,
// only row 0 of each sequence firing, rows 0, 2 and 3 of 4 firing), and the split count forced
// (AMOR_ATTENTION_DECODE_SPLITS) to many short ranges and to one. bf16 (the path is bf16 only);
// the backward is the tile one, fed this lse. (A wrong lse, +0.01, fails it on the emulator.)
TEST(CudaParity, AttentionSmallDecodeSplit) {
  AMOR_REQUIRE_GPU();
  {
    ScopedDecode split("split");
    run_cases({{2, 1, 70, 2, 1, 64, Gate::None},
               {1, 2, 300, 2, 2, 64, Gate::None},
               {2, 2, 1000, 4, 1, 64, Gate::Spread, 1},
               {1, 3, 777, 2, 1, 128, Gate::None},
               {1, 4, 1300, 3, 1, 64, Gate::None},
               {1, 4, 4, 2, 1, 64, Gate::None},
               {3, 1, 200, 2, 2, 128, Gate::AllOff},
               {2, 4, 260, 2, 1, 64, Gate::Spread, 1},
               {2, 4, 300, 2, 2, 64, Gate::Spread, 3}},
              {DType::BF16}, 5500);
  }
  {
    ScopedDecode split("split", "7");  // whole key tiles: 4 ranges of 128 keys; 7 of 32
    run_cases({{1, 1, 450, 2, 2, 64, Gate::None}, {1, 3, 200, 2, 1, 128, Gate::Amor}},
              {DType::BF16}, 5600);
  }
  {
    ScopedDecode split("split", "1");
    run_cases({{1, 2, 500, 4, 2, 64, Gate::None}}, {DType::BF16}, 5700);
  }
}

// A decode step of every sequence over a KV cache's storage in one launch
// (attention_forward_cache; models/infer/kv_cache.h): sequence b's keys are the first lens[b] of
// the storage's C rows (given on the device), its queries the last Tq of its positions.
struct CacheCase {
  int64_t Tq, C, H, Hkv, D;
  std::vector<int32_t> lens;  // one per sequence
  Gate gate;
  int64_t fired = 0;  // Gate::Spread
};

std::string name(const CacheCase& c) {
  std::string l;
  for (int32_t n : c.lens) l += (l.empty() ? "" : ",") + std::to_string(n);
  const char* g[] = {"", " gate 22%", " gate all off", " gate all on", " gate fires "};
  return "attention_forward_cache B" + std::to_string(c.lens.size()) + " Tq" + std::to_string(c.Tq) +
         " C" + std::to_string(c.C) + " lens " + l + " H" + std::to_string(c.H) + "/" +
         std::to_string(c.Hkv) + " D" + std::to_string(c.D) + g[int(c.gate)] +
         (c.gate == Gate::Spread ? std::to_string(c.fired) : std::string());
}

// Against the cpu reference (attention_forward per sequence on the views of its rows), the
// storage past every length NaN on both sides (so a kernel reading a key it should not fails),
// o and lse poisoned; gated-off rows exactly 0.
void check_cache_case(const CacheCase& c, DType dt, uint64_t seed) {
  const std::string op = name(c);
  const int64_t B = int64_t(c.lens.size());
  const Shape qs{B, c.Tq, c.H, c.D}, ks{B, c.C, c.Hkv, c.D};
  Tensor q = input(qs, seed + 1, dt), k = input(ks, seed + 2, dt), v = input(ks, seed + 3, dt);
  const int64_t per = c.C * c.Hkv * c.D;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = int64_t(c.lens[size_t(b)]) * c.Hkv * c.D; e < per; ++e) {
      k.data<float>()[b * per + e] = NAN;
      v.data<float>()[b * per + e] = NAN;
    }
  Tensor lengths = Tensor::from_vector<int32_t>({B}, c.lens);
  Tensor gate, ggate;
  if (c.gate != Gate::None) {
    gate = make_gate({B, c.Tq, c.C, c.H, c.Hkv, c.D, c.gate, c.fired}, seed + 5);
    ggate = gate.to(Device::CUDA);
  }
  AttentionOutput r = attention_forward_cache(q, k, v, lengths, gate);
  poison({{qs, dt}, {{B, c.H, c.Tq}, DType::F32}});
  AttentionOutput g = attention_forward_cache(up(q, dt), up(k, dt), up(v, dt),
                                              lengths.to(Device::CUDA), ggate);
  const double tol = dt == DType::F32 ? 1e-5 * std::max(1.0, std::sqrt(double(c.C) / 256.0)) : out_tol(dt);
  expect_close(op, "o", g.o, r.o, tol);
  expect_close(op, "lse", g.lse, r.lse, std::max(kF32Tol, dt == DType::F32 ? tol : 0.0));
  if (c.gate != Gate::None) {
    Tensor go = down(g.o);
    const uint8_t* gp = gate.data<uint8_t>();
    const int64_t row = c.H * c.D;
    int64_t bad = 0;
    for (int64_t i = 0; i < B * c.Tq; ++i)
      if (!gp[i])
        for (int64_t e = 0; e < row; ++e) bad += go.data<float>()[i * row + e] != 0.0f;
    EXPECT_EQ(bad, 0) << op << ": nonzero o at gated-off rows";
  }
}

void run_cache_cases(const std::vector<CacheCase>& cases, const std::vector<DType>& dtypes,
                     uint64_t seed) {
  for (const CacheCase& c : cases)
    for (DType dt : dtypes) check_cache_case(c, dt, seed += 10);
}

// Emulator sized: bf16 at head dim 64 and 128 (the split-KV kernel, its plan made for C), f32
// and bf16 at head dim 32 (the SIMT kernel); sequences far shorter than the storage (most key
// ranges past them: blocks that exit), one filling it, one holding a single key (row 0 of Tq 1
// sees key 0 only), Tq 2 and 4 (rows whose first keys only some see), GQA groups of 1 to 4, and
// gates (22%, all off, rows 0 and 2 of 3). Forced split counts: 8 ranges of 64 keys at C 450 (most past the
// shorter lengths) and one.
TEST(CudaParity, AttentionSmallDecodeCache) {
  AMOR_REQUIRE_GPU();
  run_cache_cases({{1, 300, 2, 1, 64, {300, 17, 1, 129}, Gate::None},
                   {2, 200, 4, 1, 64, {2, 200, 65}, Gate::None},
                   {1, 160, 2, 2, 128, {33, 160}, Gate::Amor},
                   {4, 90, 2, 1, 64, {4, 90, 37}, Gate::None},
                   {1, 70, 2, 2, 64, {70, 3}, Gate::AllOff},
                   {1, 100, 2, 1, 32, {100, 1, 42}, Gate::Amor}},
                  {DType::BF16}, 9700);
  run_cache_cases({{1, 80, 2, 1, 64, {80, 5, 1}, Gate::None},
                   {2, 50, 4, 2, 32, {2, 50}, Gate::Amor}},
                  {DType::F32}, 9800);
  {
    ScopedDecode many("auto", "8");  // at C 450, D 64: 8 ranges of 64 keys
    run_cache_cases({{1, 450, 2, 2, 64, {450, 70, 130}, Gate::None},
                     {3, 450, 4, 2, 64, {3, 200}, Gate::Spread, 2}},
                    {DType::BF16}, 9900);
  }
  {
    ScopedDecode one("auto", "1");
    run_cache_cases({{1, 300, 2, 1, 128, {300, 9}, Gate::None}}, {DType::BF16}, 9950);
  }
}

// The same at decode's realistic sizes (GPU only): batch 1 over a long reservation barely used,
// batch 64 of mixed lengths (the serial-1.5b case of issue #18: one launch instead of 64), GQA,
// head dim 128, AMOR's gate.
TEST(CudaParity, AttentionDecodeCache) {
  AMOR_REQUIRE_GPU();
  std::vector<int32_t> mixed;
  for (int i = 0; i < 64; ++i) mixed.push_back(int32_t(1 + (i * 977) % 4096));
  std::vector<int32_t> eight;
  for (int i = 0; i < 8; ++i) eight.push_back(int32_t(100 + i * 1111));
  run_cache_cases({{1, 32768, 32, 32, 64, {300}, Gate::None},
                   {1, 32768, 32, 32, 64, {32768}, Gate::None},
                   {1, 4096, 32, 8, 64, mixed, Gate::None},
                   {1, 8192, 16, 4, 128, eight, Gate::Amor},
                   {1, 4096, 16, 16, 64, mixed, Gate::Amor}},
                  {DType::BF16}, 9600);
  run_cache_cases({{1, 2048, 8, 2, 64, {5, 2048, 1000}, Gate::None}}, {DType::F32}, 9650);
}

// The split-KV decode forward at long caches (GPU only): the default choice (auto, Tk >= 1024)
// and forced, batch 1 and 8, MHA and GQA, head dim 128, the gate.
TEST(CudaParity, AttentionDecodeSplit) {
  AMOR_REQUIRE_GPU();
  {
    ScopedDecode dflt("auto");
    run_cases({{1, 1, 32768, 32, 32, 64, Gate::None},
               {8, 1, 4096, 32, 8, 64, Gate::Amor},
               {2, 4, 16384, 16, 4, 128, Gate::None},
               {1, 3, 9000, 8, 1, 64, Gate::None}},
              {DType::BF16}, 9000);
  }
  {
    ScopedDecode split("split");
    run_cases({{4, 1, 300, 32, 32, 64, Gate::Amor}, {2, 2, 1023, 16, 2, 128, Gate::None}},
              {DType::BF16}, 9100);
  }
}

// The realistic and awkward shapes (GPU only).
TEST(CudaParity, Attention) {
  AMOR_REQUIRE_GPU();
  run_cases({{4, 1, 1, 16, 16, 64, Gate::None},
             {3, 17, 17, 32, 32, 64, Gate::None},
             {2, 64, 64, 16, 16, 64, Gate::None},
             {1, 100, 100, 32, 32, 64, Gate::None},
             {2, 1000, 1000, 16, 16, 64, Gate::None},
             {1, 2048, 2048, 8, 8, 64, Gate::None},
             {1, 4096, 4096, 4, 4, 64, Gate::None},
             {2, 1000, 1000, 8, 8, 128, Gate::None},
             {1, 2048, 2048, 4, 4, 128, Gate::None}},
            {DType::BF16, DType::F32}, 6000);
}

TEST(CudaParity, AttentionGqaAndDecode) {
  AMOR_REQUIRE_GPU();
  run_cases({{2, 100, 100, 8, 2, 64, Gate::None},
             {2, 1000, 1000, 8, 2, 64, Gate::None},
             {2, 1, 300, 8, 2, 64, Gate::None},
             {3, 1, 300, 16, 16, 64, Gate::None},
             {2, 37, 300, 16, 16, 64, Gate::None},
             {2, 37, 300, 8, 2, 128, Gate::None},
             {1, 1, 4096, 8, 2, 64, Gate::None}},
            {DType::BF16, DType::F32}, 7000);
}

TEST(CudaParity, AttentionGate) {
  AMOR_REQUIRE_GPU();
  run_cases({{2, 1000, 1000, 16, 16, 64, Gate::Amor},
             {1, 2048, 2048, 8, 2, 64, Gate::Amor},
             {2, 1000, 1000, 8, 8, 128, Gate::Amor},
             {2, 37, 300, 8, 2, 64, Gate::Amor},
             {4, 1, 300, 8, 8, 64, Gate::Amor},
             {2, 100, 100, 16, 16, 64, Gate::AllOff},
             {2, 100, 100, 16, 16, 64, Gate::AllOn}},
            {DType::BF16, DType::F32}, 8000);
  // The gated layouts at training length: tile-edge firing counts, row 0 firing.
  run_cases({{1, 2048, 2048, 8, 8, 64, Gate::Spread, 513},
             {1, 2048, 2048, 4, 4, 128, Gate::Spread, 384},
             {2, 1500, 1501, 8, 2, 64, Gate::Spread, 127}},
            {DType::BF16}, 8100);
}

}  // namespace
}  // namespace amor::parity
