#include "models/presets/presets.h"

#include <cmath>

#include "kernels/core/error.h"
#include "models/presets/param_count.h"

namespace amor::model {

namespace {

constexpr int64_t kLlama3Vocab = 128256, kGpt2Vocab = 50257;
constexpr int64_t kFfMultiple = 64;  // d_ff granularity (tensor-core tiles; AMOR's are multiples)

struct Size {
  const char* name;
  int64_t target, vocab, d_model, n_layers;
  bool amor_paper;  // one of the AMOR paper's sizes (else the Mamba2 paper's)
};

// See presets.h for the sources of these shapes.
const Size kSizes[] = {
    {"130m", 130'000'000, kGpt2Vocab, 768, 12, false},
    {"180m", 180'000'000, kLlama3Vocab, 768, 12, true},
    {"370m", 370'000'000, kGpt2Vocab, 1024, 24, false},
    {"440m", 440'000'000, kLlama3Vocab, 1024, 24, true},
    {"780m", 780'000'000, kGpt2Vocab, 1536, 24, false},
    {"1.4b", 1'400'000'000, kGpt2Vocab, 2048, 24, false},
    {"1.5b", 1'500'000'000, kLlama3Vocab, 2048, 24, true},
};

// AMOR's d_ff per size (design §3).
int64_t amor_d_ff(const std::string& size) {
  if (size == "180m") return 1216;
  if (size == "440m") return 1984;
  return 4096;  // 1.5b
}

std::vector<Preset> make_presets() {
  std::vector<Preset> out;
  for (const char* kind : {"transformer", "mamba2", "gdn", "serial", "fused", "oryx", "amor"}) {
    for (const Size& s : kSizes) {
      const std::string k = kind;
      if (k == "amor" && !s.amor_paper) continue;
      Preset p;
      p.name = k + "-" + s.name;
      p.kind = k;
      p.size = s.name;
      p.target = s.target;
      p.vocab = s.vocab;
      p.d_model = s.d_model;
      p.n_layers = s.n_layers;
      if (k == "amor") p.d_ff = amor_d_ff(s.name);
      p.authors_numerics = s.amor_paper && (k == "amor" || k == "mamba2" || k == "gdn");
      if (k == "mamba2" && !s.amor_paper) {
        p.mixer_only = true;
        p.n_layers = 2 * s.n_layers;  // the starting depth; apply_preset fits it
      }
      out.push_back(p);
    }
  }
  return out;
}

// The AMOR authors' epsilons and init (models/README.md), by backbone. amor.py's own RMSNorm
// (eps 1e-6) is every MLP pre-norm, AMOR block pre-norm and final_norm, and over GDN also the
// mixer pre-norms and norm_f; over Mamba2 those two are transformers' Mamba2Block norm and
// Mamba2Model.norm_f (Mamba2Config.layer_norm_epsilon, 1e-5). The mixers' own gated norms are
// 1e-5 (transformers' layer_norm_epsilon, fla GatedDeltaNet's norm_eps default).
void set_authors_numerics(ModelConfig& c) {
  const std::string backbone = c.kind == "amor" ? c.amor.backbone : c.kind;
  constexpr double kAmorPy = 1e-6, kMixer = 1e-5;
  c.mlp_norm_eps = kAmorPy;
  if (c.kind == "amor") c.amor.norm_eps = kAmorPy;
  if (backbone == "gdn") {
    c.mixer_norm_eps = c.norm_f_eps = kAmorPy;
    c.gdn.norm_eps = kMixer;
    c.gdn.init = "fla_layer";  // amor.py builds fla's GatedDeltaNet layer alone
  } else {
    c.mixer_norm_eps = c.norm_f_eps = kMixer;
    c.mamba2.norm_eps = kMixer;
    c.mamba2.init = "hf";
  }
}

std::string names_list() {
  std::string s;
  for (const Preset& p : presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

std::string millions(int64_t n) { return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6); }

// n_layers of mixer-only layers nearest the target (the count is affine in n_layers).
int64_t fit_layers(ModelConfig c, const Preset& p) {
  c.n_layers = 1;
  const int64_t one = count_parameters(c);
  c.n_layers = 2;
  const int64_t per_layer = count_parameters(c) - one;
  const int64_t rest = one - per_layer;
  const int64_t n = std::llround(static_cast<double>(p.target - rest) / static_cast<double>(per_layer));
  AMOR_CHECK(n >= 1,
             "model.preset: '{}' cannot reach {} parameters with these model settings: the "
             "embedding and norms alone have {}",
             p.name, millions(p.target), millions(rest));
  return n;
}

// The multiple of kFfMultiple nearest the target (the count is affine in d_ff for d_ff > 0).
int64_t fit_d_ff(ModelConfig c, const Preset& p) {
  c.d_ff = kFfMultiple;
  const int64_t at1 = count_parameters(c);
  c.d_ff = 2 * kFfMultiple;
  const int64_t per_step = count_parameters(c) - at1;
  const double steps = 1.0 + static_cast<double>(p.target - at1) / static_cast<double>(per_step);
  const int64_t n = std::llround(steps);
  AMOR_CHECK(n >= 1,
             "model.preset: '{}' cannot reach {} parameters with these model settings: with the "
             "smallest MLP (d_ff {}) the model already has {}",
             p.name, millions(p.target), kFfMultiple, millions(at1));
  return n * kFfMultiple;
}

}  // namespace

const std::vector<std::string>& preset_keys() {
  static const std::vector<std::string> keys = {
      "model.kind",          "model.vocab",          "model.d_model",         "model.n_layers",
      "model.d_ff",          "model.mixer_norm_eps", "model.mlp_norm_eps",    "model.norm_f_eps",
      "model.amor.norm_eps", "model.mamba2.norm_eps", "model.gdn.norm_eps",   "model.mamba2.init",
      "model.gdn.init"};
  return keys;
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = make_presets();
  return all;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}

ModelConfig apply_preset(ModelConfig c, const std::string& name) {
  const Preset* p = nullptr;
  for (const Preset& q : presets())
    if (q.name == name) p = &q;
  if (!p)
    throw Error(fmt::format("model.preset: unknown preset '{}'; allowed: {}", name, names_list()));
  c.kind = p->kind;
  c.vocab = p->vocab;
  c.d_model = p->d_model;
  c.n_layers = p->n_layers;
  if (p->mixer_only) {
    c.d_ff = 0;
    c.n_layers = fit_layers(c, *p);
  } else if (p->d_ff >= 0) {
    c.d_ff = p->d_ff;
  } else {
    c.d_ff = fit_d_ff(c, *p);
  }
  if (p->authors_numerics) set_authors_numerics(c);
  return c;
}

}  // namespace amor::model
