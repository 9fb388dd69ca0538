// Scale presets: every preset, with every variant its kind has (AMOR backbone and K, fused and
// Oryx linear mixer, several serial patterns), within 3% of its nominal size; AMOR's exact
// dimensions and counts; the Mamba2 paper's depths; fitted d_ff is the best multiple of 64; the
// base's other settings survive; unknown and unreachable presets are errors naming model.preset.
#include "models/presets/presets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/core/error.h"

#include "models/presets/param_count.h"

namespace amor::model {
namespace {

// The configurations a preset is used with: one per variant that changes its parameter set.
std::vector<std::pair<std::string, ModelConfig>> variants_of(const Preset& p) {
  std::vector<std::pair<std::string, ModelConfig>> v;
  ModelConfig base;
  if (p.kind == "amor") {
    for (const char* b : {"gdn", "mamba2"})
      for (int64_t k : {1, 3}) {
        base.amor.backbone = b;
        base.amor.blocks = k;
        v.emplace_back(fmt::format("{} K={}", b, k), base);
      }
  } else if (p.kind == "fused" || p.kind == "oryx") {
    for (const char* lin : {"gdn", "mamba2"}) {
      base.fused_linear = lin;
      base.oryx.linear = lin;
      v.emplace_back(lin, base);
    }
  } else if (p.kind == "serial") {
    // Jamba-like 1:3, 1:1, Samba-like alternation, a 1:5 GDN hybrid (all divide 12 and 24 layers).
    for (const char* pat : {"MMMA", "GGGA", "MA", "GA", "GGGGGA", "MMMMMA"}) {
      base.pattern = pat;
      v.emplace_back(pat, base);
    }
  } else {
    v.emplace_back("", base);
  }
  return v;
}

TEST(Presets, EveryPresetIsWithinThreePercentOfItsName) {
  int checked = 0;
  for (const Preset& p : presets()) {
    for (auto& [variant, base] : variants_of(p)) {
      ModelConfig c = apply_preset(base, p.name);
      const int64_t n = count_parameters(c);
      const double rel = static_cast<double>(n) / static_cast<double>(p.target) - 1.0;
      std::printf("%-17s %-8s d %4lld  layers %2lld  d_ff %5lld  V %6lld  %14lld  %+6.2f%%\n",
                  p.name.c_str(), variant.c_str(), (long long)c.d_model, (long long)c.n_layers,
                  (long long)c.d_ff, (long long)c.vocab, (long long)n, 100 * rel);
      EXPECT_LE(std::abs(rel), 0.03) << p.name << " " << variant << ": " << n;
      ++checked;
    }
  }
  EXPECT_EQ(presets().size(), 6u * 7u + 3u);  // six kinds at seven sizes, AMOR at its three
  EXPECT_GT(checked, 100);
}

TEST(Presets, AmorHasThePapersDimensionsAndExactCounts) {
  struct Want {
    const char* name;
    int64_t d, layers, d_ff, gdn_count;
  };
  for (const Want& w : {Want{"amor-180m", 768, 12, 1216, 181'967'832},
                        Want{"amor-440m", 1024, 24, 1984, 0},
                        Want{"amor-1.5b", 2048, 24, 4096, 1'524'025'472}}) {
    ModelConfig base;
    base.amor.backbone = "gdn";
    ModelConfig c = apply_preset(base, w.name);
    EXPECT_EQ(c.kind, "amor");
    EXPECT_EQ(c.vocab, 128256) << w.name;  // Llama-3
    EXPECT_EQ(c.d_model, w.d) << w.name;
    EXPECT_EQ(c.n_layers, w.layers) << w.name;
    EXPECT_EQ(c.d_ff, w.d_ff) << w.name;
    EXPECT_EQ(c.amor.blocks, 3);
    if (w.gdn_count) {
      EXPECT_EQ(count_parameters(c), w.gdn_count) << w.name;
    }
    base.amor.backbone = "mamba2";
    EXPECT_EQ(apply_preset(base, w.name).amor.backbone, "mamba2");  // the backbone is the base's
  }
}

TEST(Presets, Mamba2AtItsPapersSizesHasThePapersMixerOnlyLayers) {
  struct Want {
    const char* name;
    int64_t d, layers;
  };
  // Mamba2 paper: 130M d 768 x 24, 370M d 1024 x 48, 780M d 1536 x 48 (mixer-only layers).
  for (const Want& w : {Want{"mamba2-130m", 768, 24}, Want{"mamba2-370m", 1024, 48},
                        Want{"mamba2-780m", 1536, 48}, Want{"mamba2-1.4b", 2048, 50}}) {
    ModelConfig c = apply_preset(ModelConfig{}, w.name);
    EXPECT_EQ(c.d_ff, 0) << w.name;
    EXPECT_EQ(c.d_model, w.d) << w.name;
    EXPECT_EQ(c.n_layers, w.layers) << w.name;
    EXPECT_EQ(c.vocab, 50257) << w.name;  // GPT-2
  }
  // At AMOR's sizes mamba2 is AMOR's backbone alone: layers with MLPs.
  ModelConfig c = apply_preset(ModelConfig{}, "mamba2-180m");
  EXPECT_EQ(c.n_layers, 12);
  EXPECT_GT(c.d_ff, 0);
}

TEST(Presets, FittedDffIsTheNearestMultipleOf64) {
  ModelConfig base;
  base.pattern = "GGGA";
  for (const char* name : {"transformer-130m", "gdn-440m", "fused-1.5b", "serial-780m", "oryx-1.4b"}) {
    ModelConfig c = apply_preset(base, name);
    ASSERT_EQ(c.d_ff % 64, 0) << name;
    const Preset& p = *std::find_if(presets().begin(), presets().end(),
                                    [&](const Preset& q) { return q.name == name; });
    auto err = [&](int64_t d_ff) {
      ModelConfig x = c;
      x.d_ff = d_ff;
      return std::llabs(count_parameters(x) - p.target);
    };
    EXPECT_LE(err(c.d_ff), err(c.d_ff - 64)) << name;
    EXPECT_LE(err(c.d_ff), err(c.d_ff + 64)) << name;
  }
}

TEST(Presets, KeepTheBasesOtherSettings) {
  ModelConfig base;
  base.kind = "transformer";
  base.gdn.qk_ratio = 1.0;
  base.norm_eps = 1e-6;
  base.recompute = true;
  ModelConfig c = apply_preset(base, "gdn-370m");
  EXPECT_EQ(c.kind, "gdn");
  EXPECT_EQ(c.gdn.qk_ratio, 1.0);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.recompute);
  // The fit accounts for the wider GDN (qk_ratio 1): still within 3%.
  EXPECT_LE(std::abs(count_parameters(c) / 370e6 - 1.0), 0.03);
}

// The AMOR presets and the mamba2 / gdn presets at AMOR's sizes take the authors' epsilons and
// init (presets.h, models/README.md "Norm epsilons"); every other preset leaves them as the base's.
TEST(Presets, AuthorsNumericsAtAmorSizes) {
  for (const char* size : {"180m", "440m", "1.5b"}) {
    for (const char* backbone : {"gdn", "mamba2"}) {
      ModelConfig base;
      base.amor.backbone = backbone;
      for (const std::string kind : {std::string("amor"), std::string(backbone)}) {
        const std::string name = kind + "-" + size;
        const ModelConfig c = apply_preset(base, name);
        const bool gdn = std::string(backbone) == "gdn";
        EXPECT_EQ(c.mlp_norm_eps, 1e-6) << name;
        EXPECT_EQ(c.mixer_norm_eps, gdn ? 1e-6 : 1e-5) << name;
        EXPECT_EQ(c.norm_f_eps, gdn ? 1e-6 : 1e-5) << name;
        EXPECT_EQ(c.amor.norm_eps, kind == "amor" ? 1e-6 : 0.0) << name;
        EXPECT_EQ(c.gdn.norm_eps, 1e-5) << name;
        EXPECT_EQ(c.mamba2.norm_eps, gdn ? 0.0 : 1e-5) << name;
        EXPECT_EQ(c.mamba2.init, gdn ? "mamba_ssm" : "hf") << name;
        EXPECT_EQ(c.gdn.init, "fla_layer") << name;
      }
    }
  }
  ModelConfig base;
  base.pattern = "GGGA";
  for (const char* name : {"mamba2-130m", "gdn-370m", "transformer-180m", "serial-180m",
                           "fused-440m", "oryx-1.5b"}) {
    const ModelConfig c = apply_preset(base, name);
    EXPECT_EQ(c.mixer_norm_eps, 0.0) << name;
    EXPECT_EQ(c.mlp_norm_eps, 0.0) << name;
    EXPECT_EQ(c.norm_f_eps, 0.0) << name;
    EXPECT_EQ(c.mamba2.norm_eps, 0.0) << name;
    EXPECT_EQ(c.mamba2.init, "mamba_ssm") << name;
  }
}

TEST(Presets, UnknownNameListsTheAllowedNames) {
  try {
    apply_preset(ModelConfig{}, "gdn-7b");
    ADD_FAILURE() << "no error for gdn-7b";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("model.preset: unknown preset 'gdn-7b'; allowed: transformer-130m, ", 0), 0u)
        << m;
    for (const std::string& n : preset_names()) EXPECT_NE(m.find(n), std::string::npos) << n;
  }
}

TEST(Presets, UnreachableSizeIsAnError) {
  ModelConfig base;
  base.fused_linear = "mamba2";
  base.mamba2.expand = 16;  // the fused mixers alone exceed 180M at d 768 x 12
  try {
    apply_preset(base, "fused-180m");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("model.preset: 'fused-180m' cannot reach 180.0M parameters", 0), 0u)
        << e.what();
  }
  base = ModelConfig{};
  base.kind = "serial";  // no pattern: the pattern's own error
  try {
    apply_preset(base, "serial-130m");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.pattern"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace amor::model
