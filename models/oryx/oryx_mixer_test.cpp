// OryxMixer in double: finite-difference gradients of x and every parameter for both linear kinds
// with mixed modes; all-attention modes equal attention alone and all-linear modes the linear
// mixer alone (run as a step-by-step recurrence, while the mixer runs the chunked scan); each
// token's output and gradient come from its own mixer only; parameter names, shapes and the
// share of shared parameters at d = 768; config mistakes are errors naming their key.
#include "models/oryx/oryx_mixer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/attention/attention.h"
#include "kernels/conv1d/conv1d.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gated_delta/gated_delta.h"
#include "kernels/l2norm/l2norm.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm_gated.h"
#include "kernels/rope/rope.h"
#include "kernels/ssd/ssd.h"
#include "models/core/layer.h"
#include "models/oryx/oryx_test_support.h"
#include "tests/common/gradcheck.h"
#include "tests/common/random.h"

namespace amor::model {
namespace {

using testing_oryx::modes_of;
using testing_oryx::tiny_oryx;

const std::vector<std::string> kMixed = {"111000111", "000111000"};

struct Fixture {
  ParamStore ps{DType::F64};
  OryxMixer mixer;
  Tensor x;
  explicit Fixture(const ModelConfig& cfg, uint64_t seed, int64_t B = 2, int64_t T = 9)
      : mixer(ps, "mixer", cfg) {
    ps.initialize(seed);
    x = testing::randn({B, T, cfg.d_model}, seed + 1);
  }
  Tensor value(const std::string& n) const { return ps.find("mixer." + n)->value; }
  Tensor grad(const std::string& n) const { return ps.find("mixer." + n)->grad; }
  Tensor forward(const Tensor& modes) {
    MixerContext ctx;
    ctx.modes = modes;
    return mixer.forward(x, ctx);
  }
};

void gradcheck_mixer(const ModelConfig& cfg, const Tensor& modes, uint64_t seed) {
  Fixture f(cfg, seed);
  Tensor w = testing::randn(f.x.shape(), seed + 2);
  f.ps.zero_grad();
  f.forward(modes);
  Tensor dx = f.mixer.backward(w);
  std::vector<testing::GradInput> inputs{{"x", f.x, dx}};
  for (auto& p : f.ps.params()) inputs.push_back({p->name, p->value, p->grad.clone()});
  testing::GradcheckReport worst;
  for (auto& r :
       testing::gradcheck([&] { return std::vector<Tensor>{f.forward(modes)}; }, {w}, inputs))
    if (r.error >= worst.error) worst = r;
  std::printf("oryx %s gradcheck: worst scaled error %.2e (%s) over x and %zu parameters\n",
              cfg.oryx.linear.c_str(), worst.error, worst.name.c_str(), f.ps.params().size());
}

TEST(OryxMixer, GradcheckGdnMixedModes) { gradcheck_mixer(tiny_oryx("gdn"), modes_of(kMixed), 10); }
TEST(OryxMixer, GradcheckMamba2MixedModes) {
  gradcheck_mixer(tiny_oryx("mamba2"), modes_of(kMixed), 20);
}
TEST(OryxMixer, GradcheckAllAttentionAndAllLinear) {
  gradcheck_mixer(tiny_oryx("gdn"), modes_of({"111111111", "111111111"}), 30);
  gradcheck_mixer(tiny_oryx("mamba2"), modes_of({"000000000", "000000000"}), 40);
}

// The shared output stage W_O · gatedRMSNorm(o, silu(W_G x)), composed from the ops.
Tensor shared_output(const Fixture& f, const ModelConfig& cfg, const Tensor& o) {
  int64_t B = f.x.size(0), T = f.x.size(1), H = cfg.d_model / cfg.head_dim;
  Tensor z = linear_forward(f.x, f.value("g_proj.weight")).view({B, T, H, cfg.head_dim});
  Tensor n =
      rmsnorm_gated_forward(o, z, f.value("o_norm.weight"), cfg.head_dim, cfg.norm_eps, true).y;
  return linear_forward(n.view({B, T, cfg.d_model}), f.value("o_proj.weight"));
}

Tensor short_conv(const Fixture& f, const std::string& proj, const std::string& conv, bool silu,
                  int64_t H, int64_t hd) {
  Tensor pre = linear_forward(f.x, f.value(proj + ".weight"));
  return conv1d_forward(pre, f.value(conv + ".weight"), Tensor(), silu)
      .y.view({f.x.size(0), f.x.size(1), H, hd});
}

TEST(OryxMixer, AllAttentionModesAreAttentionOverTheSharedKeys) {
  for (const char* kind : {"gdn", "mamba2"}) {
    ModelConfig cfg = tiny_oryx(kind);
    Fixture f(cfg, 50);
    int64_t B = 2, T = 9, H = 4, hd = 4;
    bool silu = cfg.oryx.linear == "gdn";
    Tensor y = f.forward(modes_of({"111111111", "111111111"}));
    Tensor q = linear_forward(f.x, f.value("q_attn_proj.weight")).view({B, T, H, hd});
    Tensor k = short_conv(f, "k_proj", "k_conv1d", silu, H, hd);
    Tensor v = short_conv(f, "v_proj", "v_conv1d", silu, H, hd);
    Tensor o = attention_forward(rope_forward(q), rope_forward(k), v).o;
    EXPECT_LT(testing::max_abs_diff(y, shared_output(f, cfg, o)), 1e-14) << kind;
  }
}

// All-linear modes against the linear mixer alone, its scan run step by step (chunk 0).
TEST(OryxMixer, AllLinearModesAreTheRecurrentLinearMixer) {
  for (const char* kind : {"gdn", "mamba2"}) {
    ModelConfig cfg = tiny_oryx(kind);
    Fixture f(cfg, 60);
    int64_t H = 4, hd = 4;
    bool gdn = cfg.oryx.linear == "gdn";
    Tensor y = f.forward(modes_of({"000000000", "000000000"}));
    Tensor q = short_conv(f, "q_lin_proj", "q_lin_conv1d", gdn, H, hd);
    Tensor k = short_conv(f, "k_proj", "k_conv1d", gdn, H, hd);
    Tensor v = short_conv(f, "v_proj", "v_conv1d", gdn, H, hd);
    Tensor A = f.value("A_log").clone();
    for (int64_t h = 0; h < H; ++h) A.set_item(h, -std::exp(A.item(h)));
    Tensor o;
    if (gdn) {
      Tensor beta = sigmoid_forward(linear_forward(f.x, f.value("b_proj.weight")));
      Tensor g = channel_scale_forward(
          bias_softplus_forward(linear_forward(f.x, f.value("a_proj.weight")), f.value("dt_bias")),
          A);
      o = gated_delta_forward(l2norm_forward(q).y, l2norm_forward(k).y, v, g, beta, Tensor(),
                              gated_delta_default_scale(hd), /*chunk_size=*/0)
              .o;
    } else {
      Tensor dt =
          bias_softplus_forward(linear_forward(f.x, f.value("dt_proj.weight")), f.value("dt_bias"));
      o = ssd_forward(v, dt, A, k, q, f.value("D"), Tensor(), /*chunk_size=*/0).y;
    }
    EXPECT_LT(testing::rel_rms(y, shared_output(f, cfg, o)), 1e-12) << kind;
    EXPECT_GT(testing::rel_rms(y, Tensor::zeros(y.shape(), DType::F64)), 0.1)
        << kind;  // not trivially 0
  }
}

// t [B,T,d] with the rows whose mode is not `mode` zeroed.
Tensor rows_where(const Tensor& t, const Tensor& modes, uint8_t mode) {
  Tensor r = t.clone();
  int64_t d = t.size(2);
  for (int64_t i = 0; i < modes.numel(); ++i)
    if (modes.data<uint8_t>()[i] != mode)
      for (int64_t c = 0; c < d; ++c) r.set_item(i * d + c, 0.0);
  return r;
}

bool all_zero(const Tensor& t) {
  return testing::max_abs_diff(t, Tensor::zeros(t.shape(), t.dtype())) == 0.0;
}

const std::vector<std::string> kLinearOnly = {"q_lin_proj.weight", "q_lin_conv1d.weight", "A_log",
                                              "dt_bias"};

TEST(OryxMixer, EachRowsGradientReachesOnlyItsOwnQuery) {
  for (const char* kind : {"gdn", "mamba2"}) {
    ModelConfig cfg = tiny_oryx(kind);
    Fixture f(cfg, 70);
    Tensor modes = modes_of(kMixed);
    Tensor w = testing::randn(f.x.shape(), 71);
    std::vector<std::string> lin = kLinearOnly;
    if (cfg.oryx.linear == "gdn") {
      lin.insert(lin.end(), {"a_proj.weight", "b_proj.weight"});
    } else {
      lin.insert(lin.end(), {"dt_proj.weight", "D"});
    }

    f.ps.zero_grad();  // loss on linear rows only: nothing reaches W_Q^attn
    f.forward(modes);
    f.mixer.backward(rows_where(w, modes, 0));
    EXPECT_TRUE(all_zero(f.grad("q_attn_proj.weight"))) << kind;
    for (auto& n : lin) EXPECT_FALSE(all_zero(f.grad(n))) << kind << " " << n;
    EXPECT_FALSE(all_zero(f.grad("k_proj.weight"))) << kind;

    f.ps.zero_grad();  // loss on attention rows only: nothing reaches the linear mixer's own params
    f.forward(modes);
    f.mixer.backward(rows_where(w, modes, 1));
    EXPECT_FALSE(all_zero(f.grad("q_attn_proj.weight"))) << kind;
    for (auto& n : lin) EXPECT_TRUE(all_zero(f.grad(n))) << kind << " " << n;
    EXPECT_FALSE(all_zero(f.grad("k_proj.weight"))) << kind;
  }
}

// Changing one mixer's query changes the output at that mixer's rows and nowhere else.
TEST(OryxMixer, EachRowsOutputComesFromItsOwnMixer) {
  for (const char* kind : {"gdn", "mamba2"}) {
    Fixture f(tiny_oryx(kind), 80);
    Tensor modes = modes_of(kMixed);
    Tensor y0 = f.forward(modes);
    for (auto [name, mode] : {std::pair<const char*, uint8_t>{"q_attn_proj.weight", 1},
                              std::pair<const char*, uint8_t>{"q_lin_proj.weight", 0}}) {
      Tensor w = f.value(name);
      Tensor saved = w.clone();
      add_(w, testing::randn(w.shape(), 81, DType::F64, 0.1));
      Tensor dy = add(f.forward(modes), scale(y0, -1.0));
      w.copy_from(saved);
      EXPECT_TRUE(all_zero(rows_where(dy, modes, 1 - mode))) << kind << " " << name;
      EXPECT_FALSE(all_zero(rows_where(dy, modes, mode))) << kind << " " << name;
    }
  }
}

// At d = 768 (H = 12 heads of 64, conv kernel 4): every parameter's name and shape, and how many
// are shared between the mixers, for the mixer alone and for a layer with its norms and a SwiGLU
// MLP (d_ff 2048), which every token uses whatever its mode.
TEST(OryxMixer, ParametersAndSharedShareAtD768) {
  const int64_t d = 768, H = 12, K = 4, dff = 2048;
  for (const char* kind : {"gdn", "mamba2"}) {
    ModelConfig cfg;
    cfg.kind = "oryx";
    cfg.d_model = d;
    cfg.oryx.linear = kind;
    ParamStore ps(DType::F32);
    OryxMixer mixer(ps, "layers.0.mixer", cfg);
    std::vector<std::pair<std::string, Shape>> expected = {
        {"q_attn_proj.weight", {d, d}}, {"q_lin_proj.weight", {d, d}},
        {"k_proj.weight", {d, d}},      {"v_proj.weight", {d, d}},
        {"g_proj.weight", {d, d}},      {"q_lin_conv1d.weight", {d, K}},
        {"k_conv1d.weight", {d, K}},    {"v_conv1d.weight", {d, K}}};
    if (std::string(kind) == "gdn") {
      expected.insert(
          expected.end(),
          {{"a_proj.weight", {H, d}}, {"b_proj.weight", {H, d}}, {"A_log", {H}}, {"dt_bias", {H}}});
    } else {
      expected.insert(expected.end(),
                      {{"dt_proj.weight", {H, d}}, {"A_log", {H}}, {"dt_bias", {H}}, {"D", {H}}});
    }
    expected.insert(expected.end(), {{"o_norm.weight", {64}}, {"o_proj.weight", {d, d}}});
    ASSERT_EQ(ps.params().size(), expected.size()) << kind;
    for (size_t i = 0; i < expected.size(); ++i) {
      const Param& p = *ps.params()[i];
      EXPECT_EQ(p.name, "layers.0.mixer." + expected[i].first);
      EXPECT_EQ(p.value.shape(), expected[i].second) << p.name;
      EXPECT_EQ(p.weight_decay, p.value.dim() >= 2) << p.name;
    }
    const int64_t shared = 4 * d * d + 2 * d * K + 64;  // W_K, W_V, W_G, W_O, 2 convs, norm
    const int64_t specific =
        2 * d * d + d * K + (std::string(kind) == "gdn" ? 2 * H * d + 2 * H : H * d + 3 * H);
    EXPECT_EQ(ps.numel(), shared + specific);
    EXPECT_DOUBLE_EQ(oryx_shared_fraction(ps), double(shared) / double(shared + specific));

    cfg.d_ff = dff;
    ParamStore layer_ps(DType::F32);
    Layer layer(layer_ps, "layers.0", cfg,
                std::make_unique<OryxMixer>(layer_ps, "layers.0.mixer", cfg));
    const int64_t layer_shared = shared + 2 * d + 3 * d * dff;
    EXPECT_EQ(layer_ps.numel(), layer_shared + specific);
    EXPECT_DOUBLE_EQ(oryx_shared_fraction(layer_ps),
                     double(layer_shared) / double(layer_shared + specific));
  }
}

template <class F>
void expect_error_naming(F f, const std::string& key) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(OryxMixer, BadConfigsAndModesAreClearErrors) {
  auto build = [](ModelConfig c) {
    ParamStore ps(DType::F64);
    OryxMixer m(ps, "mixer", c);
  };
  ModelConfig c = tiny_oryx("rwkv");
  expect_error_naming([&] { build(c); }, "model.oryx.linear");
  c = tiny_oryx("gdn");
  c.head_dim = 5;
  expect_error_naming([&] { build(c); }, "model.head_dim");
  c = tiny_oryx("gdn");
  c.n_kv_heads = 1;
  expect_error_naming([&] { build(c); }, "model.n_kv_heads");
  c = tiny_oryx("mamba2");
  c.oryx.schedule = "linear:4,sideways:*";
  expect_error_naming([&] { build(c); }, "model.oryx.schedule");
  c = tiny_oryx("mamba2");
  c.mamba2.a_max = 0;
  expect_error_naming([&] { build(c); }, "model.mamba2.a_min");
  c = tiny_oryx("gdn");
  c.gdn.conv_kernel = 0;
  expect_error_naming([&] { build(c); }, "model.gdn.conv_kernel");

  Fixture f(tiny_oryx("gdn"), 90);
  expect_error_naming([&] { f.forward(Tensor()); }, "modes");
  expect_error_naming([&] { f.forward(modes_of({"111", "000"})); }, "modes");
}

}  // namespace
}  // namespace amor::model
