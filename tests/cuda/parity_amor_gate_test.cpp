// CUDA == cpu reference for AMOR's gate ops (kernels/amor_gate): the median of the entropies
// exactly (it is one of them: odd and even counts, ties, one value, a million values), the
// unbiased std to double rounding (the GPU sums in another fixed order), the EMA step bit for bit
// from the same statistics, the mask exactly (ties with tau included), and several training steps
// chained on the device against the same steps on the cpu.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/amor_gate/amor_gate.h"
#include "tests/cuda/parity.h"

namespace amor::parity {
namespace {

// n f32 entropies in [0, 1): continuous (levels 0) or drawn from `levels` values k/levels (ties;
// 0 among them; levels 1 makes every value 0).
Tensor entropies(int64_t n, int levels, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, levels > 0 ? levels - 1 : 0);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = levels > 0 ? static_cast<float>(pick(rng)) / static_cast<float>(levels) : u(rng);
  return Tensor::from_vector<float>({n}, v);
}

bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// One table line per compared double: op, what, n, the two values, the relative difference.
void expect_double(const std::string& op, const std::string& what, int64_t n, double gpu, double ref,
                   double rel_tol) {
  const double diff = same_double(gpu, ref) ? 0.0 : std::abs(gpu - ref) / std::max(std::abs(ref), 1e-300);
  const bool ok = rel_tol == 0 ? same_double(gpu, ref) : (same_double(gpu, ref) || diff <= rel_tol);
  std::printf("[parity] %-40s %-9s n=%-10lld gpu %.17g ref %.17g  rel %.1e%s\n", op.c_str(), what.c_str(),
              static_cast<long long>(n), gpu, ref, diff, ok ? "" : "  FAIL");
  EXPECT_TRUE(ok) << op << " " << what << " n=" << n << ": gpu " << gpu << " vs ref " << ref;
}

// The GPU sums in a tree, the cpu in index order: over 1M values the cpu's running sum alone is
// off by ~1e-12 relative. Far below float rounding (what the thresholds are held to).
constexpr double kStdTol = 1e-9;

struct StatsCase {
  int64_t n;
  int levels;
};

// Odd and even counts from one value up; ties (few levels, all equal); a micro-batch of B*T
// tokens and one of ~1M (B*T times ranks); counts that are not multiples of a block.
const StatsCase kStatsCases[] = {{1, 0},     {2, 0},         {3, 0},          {4, 0},    {2, 1},
                                 {7, 3},     {1000, 0},      {1001, 0},       {1024, 1}, {4096, 5},
                                 {65537, 0}, {8 * 2048, 40}, {(1 << 20) + 3, 0}, {1 << 20, 64}};

TEST(CudaParity, AmorEntropyStats) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 5100;
  for (const StatsCase& c : kStatsCases) {
    Tensor x = entropies(c.n, c.levels, ++seed);
    poison({{{2}, DType::F64}});
    Tensor g = amor_entropy_stats(x.to(Device::CUDA));
    EXPECT_EQ(g.device(), Device::CUDA);
    Tensor gh = g.to(Device::CPU), r = amor_entropy_stats(x);
    const std::string op = "amor_entropy_stats" + std::string(c.levels ? " (ties)" : "");
    expect_double(op, "median", c.n, gh.item(0), r.item(0), 0.0);
    expect_double(op, "std", c.n, gh.item(1), r.item(1), kStdTol);
  }
  // Shapes are flattened: [B, T] as the gate hands them.
  Tensor bt = entropies(3 * 333, 0, ++seed).view({3, 333});
  expect_double("amor_entropy_stats [B,T]", "median", bt.numel(),
                amor_entropy_stats(bt.to(Device::CUDA)).to(Device::CPU).item(0), amor_entropy_stats(bt).item(0), 0.0);
}

// The EMA step from the same statistics: bit for bit (the kernel rounds every product and sum on
// its own, as the cpu does), in both modes, with momentum 0 and 1, and a NaN std (one entropy).
TEST(CudaParity, AmorGateUpdate) {
  AMOR_REQUIRE_GPU();
  const AmorGateRule rules[] = {{true, 1.0, 0.99, 0.0},  {true, 0.37, 0.9, 0.0}, {false, 0.0, 0.99, 0.03},
                                {false, 0.5, 0.7, -0.01}, {true, 2.5, 0.0, 0.0},  {true, 1.0, 1.0, 0.0}};
  std::mt19937_64 rng(5200);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const AmorGateRule& rule : rules) {
    for (int trial = 0; trial < 4; ++trial) {
      Tensor state = amor_gate_state(u(rng), 0.2 * u(rng), rule);
      Tensor stats = Tensor::from_vector<double>({2}, {u(rng), trial == 3 ? std::nan("") : 0.3 * u(rng)});
      poison({{{3}, DType::F64}});
      Tensor g = amor_gate_update(state.to(Device::CUDA), stats.to(Device::CUDA), rule).to(Device::CPU);
      Tensor r = amor_gate_update(state, stats, rule);
      const std::string op = std::string("amor_gate_update ") + (rule.adaptive ? "adaptive" : "fixed");
      expect_double(op, "m", 1, g.item(0), r.item(0), 0.0);
      expect_double(op, "s", 1, g.item(1), r.item(1), 0.0);
      expect_double(op, "tau", 1, g.item(2), r.item(2), 0.0);
    }
  }
}

// The mask against the same tau: exact, with tau equal to some of the entropies (strictly above
// fires) and counts that are not a multiple of a block.
TEST(CudaParity, AmorGateMask) {
  AMOR_REQUIRE_GPU();
  uint64_t seed = 5300;
  for (const Shape& shape : std::vector<Shape>{{4, 2048}, {1, 1}, {3, 1001}, {1 << 20}}) {
    const int64_t n = shape_numel(shape);
    for (int levels : {0, 7}) {
      Tensor H = entropies(n, levels, ++seed).view(shape);
      const double tau = levels ? 3.0 / 7.0 : H.item(0);  // a value some entropies equal
      Tensor state = Tensor::from_vector<double>({3}, {0.3, 0.1, static_cast<double>(static_cast<float>(tau))});
      poison({{shape, DType::U8}});
      Tensor g = amor_gate_mask(H.to(Device::CUDA), state.to(Device::CUDA));
      expect_equal(std::string("amor_gate_mask") + (levels ? " (ties)" : ""), "gate", g, amor_gate_mask(H, state));
    }
  }
}

// Training steps as an AMOR gate takes them, on the device without reading anything back, against
// the same steps on the cpu: each step's median is exact, so m stays bitwise equal; s and tau
// follow the std to double rounding; the gates agree except for entropies within rounding of tau.
TEST(CudaParity, AmorGateTrainingSteps) {
  AMOR_REQUIRE_GPU();
  for (const AmorGateRule& rule : {AmorGateRule{true, 1.0, 0.9, 0.0}, AmorGateRule{false, 0.0, 0.5, 0.02}}) {
    Tensor gs = amor_gate_state(0.3, 0.1, rule).to(Device::CUDA), cs = amor_gate_state(0.3, 0.1, rule);
    uint64_t seed = 5400;
    std::vector<Tensor> gpu_gates, cpu_gates, batches;
    std::vector<double> cpu_tau;
    for (int step = 0; step < 6; ++step) {
      // Micro-batches of [B=4, T=1000] entropies, alternating continuous and tied values.
      Tensor H = entropies(4000, step % 2 ? 50 : 0, ++seed).view({4, 1000});
      gs = amor_gate_update(gs, amor_entropy_stats(H.to(Device::CUDA)), rule);
      gpu_gates.push_back(amor_gate_mask(H.to(Device::CUDA), gs));
      cs = amor_gate_update(cs, amor_entropy_stats(H), rule);
      cpu_gates.push_back(amor_gate_mask(H, cs));
      cpu_tau.push_back(cs.item(2));
      batches.push_back(H);
    }
    Tensor g = gs.to(Device::CPU);  // the one read back, at the end
    const std::string op = std::string("amor gate 6 steps ") + (rule.adaptive ? "adaptive" : "fixed");
    expect_double(op, "m", 4000, g.item(0), cs.item(0), 0.0);
    expect_double(op, "s", 4000, g.item(1), cs.item(1), kStdTol);
    expect_double(op, "tau", 4000, g.item(2), cs.item(2), kStdTol);
    for (size_t k = 0; k < gpu_gates.size(); ++k) {
      Tensor a = gpu_gates[k].to(Device::CPU);
      int64_t differ = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        if (a.data<uint8_t>()[i] == cpu_gates[k].data<uint8_t>()[i]) continue;
        if (std::abs(batches[k].item(i) - cpu_tau[k]) > kStdTol) ++differ;
      }
      EXPECT_EQ(differ, 0) << op << " step " << k << ": gates differ away from tau";
    }
  }
}

TEST(CudaParity, AmorGateErrors) {
  AMOR_REQUIRE_GPU();
  Tensor H = Tensor::zeros({4}, DType::F32, Device::CUDA);
  EXPECT_NE(error_of([&] { amor_entropy_stats(Tensor::zeros({4}, DType::BF16, Device::CUDA)); })
                .find("amor_entropy_stats: argument 'values' is bf16[4]@cuda; on cuda it must be f32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { amor_gate_mask(H, amor_gate_state(0.3, 0.1, {})); })
                .find("amor_gate_mask: argument 'state' is f64[3]@cpu but 'H' is f32[4]@cuda"),
            std::string::npos);
}

}  // namespace
}  // namespace amor::parity
