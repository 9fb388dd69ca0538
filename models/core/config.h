// The model part of a run's config (`model.*` keys). Defaults follow design §3; every detail a
// paper leaves open is a member here.
//
// Each struct is followed by its declare_keys listing (models/core/config_keys.h): one line per
// member with its key, the values it may take and its doc. That listing is the only place that
// names a key, bounds it or documents it; the member initialiser is the only place that sets its
// default. Model constructors may assert too, but a value they refuse must be refused by the
// listing (runner/app/declared_values_build_test.cpp tries every edge of every range). Keys added
// after the run identities were pinned are declared omitted_at_default (config_keys.h), so that
// a run that leaves them at their default keeps its hash.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "models/core/config_keys.h"

namespace amor::model {

struct Mamba2Config {
  int64_t d_state = 128;
  int64_t expand = 2;
  int64_t head_dim = 64;
  int64_t n_groups = 1;
  int64_t conv_kernel = 4;
  int64_t chunk = 64;
  double dt_min = 1e-3, dt_max = 0.1, dt_floor = 1e-4;
  double a_min = 1.0, a_max = 16.0;
  double norm_eps = 0;              // 0: model.norm_eps (models/core/norm_eps.h)
  std::string init = "mamba_ssm";
};

template <class V>
void declare_keys(std::type_identity<Mamba2Config>, V& v) {
  using namespace keys;
  using C = Mamba2Config;
  v.key("d_state", &C::d_state, size_from(1), "N: the state size of each head");
  v.key("expand", &C::expand, size_from(1), "d_inner = expand * d_model");
  v.key("head_dim", &C::head_dim, size_from(1), "P: heads = d_inner / head_dim");
  v.key("n_groups", &C::n_groups, size_from(1), "G: B and C groups; divides the heads");
  v.key("conv_kernel", &C::conv_kernel, size_from(1), "causal depthwise conv width");
  v.key("chunk", &C::chunk, at_least(1), "SSD chunk length");
  v.key("dt_min", &C::dt_min, positive(), "dt init: log-uniform in [dt_min, dt_max]");
  v.key("dt_max", &C::dt_max, positive(), "");
  v.key("dt_floor", &C::dt_floor, positive(), "dt init clamped below at this");
  v.key("a_min", &C::a_min, positive(), "A_log = log(U[a_min, a_max])");
  v.key("a_max", &C::a_max, positive(), "");
  v.key("norm_eps", &C::norm_eps, omitted_at_default(at_least(0)),
        "gated RMSNorm epsilon; 0 = model.norm_eps");
  v.key("init", &C::init, omitted_at_default(one_of("mamba_ssm|hf")),
        "mamba_ssm: A_log = log U[a_min, a_max]; hf: A_log = log(1..H) (models/README.md)");
}

struct GdnConfig {
  int64_t head_dim = 64;
  double qk_ratio = 0.75;
  double v_expand = 2.0;
  int64_t conv_kernel = 4;
  int64_t chunk = 64;
  double norm_eps = 1e-5;
  double dt_min = 1e-3, dt_max = 0.1, dt_floor = 1e-4;
  double a_min = 0.0, a_max = 16.0;
  std::string init = "fla_layer";
};

template <class V>
void declare_keys(std::type_identity<GdnConfig>, V& v) {
  using namespace keys;
  using C = GdnConfig;
  v.key("head_dim", &C::head_dim, size_from(1), "K: heads = round(qk_ratio * d_model / head_dim)");
  v.key("qk_ratio", &C::qk_ratio, positive(), "H·K = qk_ratio·d (fla's expand_k)");
  v.key("v_expand", &C::v_expand, positive(), "V = v_expand·K per head, an integer");
  v.key("conv_kernel", &C::conv_kernel, size_from(1), "causal depthwise conv width");
  v.key("chunk", &C::chunk, at_least(1), "chunked delta rule length");
  v.key("norm_eps", &C::norm_eps, positive(), "output gated RMSNorm epsilon");
  v.key("dt_min", &C::dt_min, positive(), "dt init: log-uniform in [dt_min, dt_max]");
  v.key("dt_max", &C::dt_max, positive(), "");
  v.key("dt_floor", &C::dt_floor, positive(), "dt init clamped below at this");
  v.key("a_min", &C::a_min, at_least(0), "A_log = log(U[a_min, a_max]) as fla");
  v.key("a_max", &C::a_max, positive(), "");
  v.key("init", &C::init, omitted_at_default(one_of("fla_layer|fla_model")),
        "short convs: fla_layer U(±1/sqrt(kernel)), fla_model N(0, init_std) (models/README.md)");
}

struct AmorConfig {
  std::string backbone = "gdn";
  int64_t blocks = 3;
  std::string residual_mode = "classic";
  std::string offset_mode = "adaptive";
  double kappa = 0.2;
  double momentum = 0.99;
  double m_init = 0.3, s_init = 0.1;
  double fixed_offset = 0.03;
  double norm_eps = 0;  // 0: model.norm_eps
};

template <class V>
void declare_keys(std::type_identity<AmorConfig>, V& v) {
  using namespace keys;
  using C = AmorConfig;
  v.key("backbone", &C::backbone, one_of("gdn|mamba2"), "the recurrent layers before the blocks");
  v.key("blocks", &C::blocks, one_of("1|3"), "K: post-hoc attention blocks (the paper's 1 or 3)");
  v.key("residual_mode", &C::residual_mode, one_of("classic|h"), "");
  v.key("offset_mode", &C::offset_mode, one_of("adaptive|fixed"), "");
  v.key("kappa", &C::kappa, at_least(0), "adaptive: τ = m + κ·s");
  v.key("momentum", &C::momentum, in_range(0, 1),
        "EMA momentum; 1 freezes τ at its initial value (an ablation)");
  v.key("m_init", &C::m_init, anything(), "initial EMA mean of the entropy");
  v.key("s_init", &C::s_init, at_least(0), "initial EMA standard deviation");
  v.key("fixed_offset", &C::fixed_offset, anything(), "fixed mode: τ = m + offset");
  v.key("norm_eps", &C::norm_eps, omitted_at_default(at_least(0)),
        "epsilon of the blocks' pre-norms (k ≥ 1) and final_norm; 0 = model.norm_eps");
}

// "" when `schedule` is one of the keywords or a segment list the model can run, else what is
// wrong with it (models/oryx/oryx_modes.cpp, the model's own parser).
std::string oryx_schedule_problem(const std::string& schedule);

struct OryxConfig {
  std::string linear = "gdn";
  int64_t chunk = 128;
  double p_attention = 0.5;
  std::string schedule = "attention";
};

template <class V>
void declare_keys(std::type_identity<OryxConfig>, V& v) {
  using namespace keys;
  using C = OryxConfig;
  v.key("linear", &C::linear, one_of("gdn|mamba2"), "Oryx-TG / Oryx-TM");
  v.key("chunk", &C::chunk, at_least(1), "training chunk per mixer choice");
  v.key("p_attention", &C::p_attention, in_range(0, 1),
        "probability that a training chunk uses attention");
  v.key("schedule", &C::schedule,
        text("attention, linear, prefill_linear_decode_attention or segments such as "
             "`linear:512,attention:*`",
             &oryx_schedule_problem),
        "inference: the mixer of each position");
}

struct ModelConfig {
  std::string kind = "transformer";
  int64_t vocab = 256;
  int64_t d_model = 64;
  int64_t n_layers = 2;
  int64_t d_ff = 0;
  int64_t head_dim = 64;
  int64_t n_kv_heads = 0;
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
  double mixer_norm_eps = 0, mlp_norm_eps = 0, norm_f_eps = 0;  // 0: norm_eps
  double init_std = 0.02;
  std::string pattern;
  std::string fused_linear = "mamba2";
  int64_t vocab_chunk = 8192;
  bool recompute = false;
  Mamba2Config mamba2;
  GdnConfig gdn;
  AmorConfig amor;
  OryxConfig oryx;
};

template <class V>
void declare_keys(std::type_identity<ModelConfig>, V& v) {
  using namespace keys;
  using C = ModelConfig;
  v.key("kind", &C::kind, one_of("transformer|mamba2|gdn|serial|fused|amor|oryx"),
        "the architecture (models/README.md)");
  v.key("vocab", &C::vocab, size_from(2),
        "corpus and shards runs: at least the tokenizer's ids (byte 259, gpt2 50257, llama3 "
        "128256), so set it");
  v.key("d_model", &C::d_model, size_from(1), "the width");
  v.key("n_layers", &C::n_layers, in_range(0, kMaxLayers), "");
  v.key("d_ff", &C::d_ff, size_from(0), "SwiGLU hidden size; 0 = no MLP");
  v.key("head_dim", &C::head_dim, size_from(1), "attention head dim");
  v.key("n_kv_heads", &C::n_kv_heads, size_from(0), "0 = MHA");
  v.key("rope_base", &C::rope_base, positive(), "");
  v.key("norm_eps", &C::norm_eps, positive(),
        "RMSNorm epsilon; the per-location epsilon keys at 0 take it");
  v.key("mixer_norm_eps", &C::mixer_norm_eps, omitted_at_default(at_least(0)),
        "layers' pre-mixer norms (norm1); 0 = norm_eps");
  v.key("mlp_norm_eps", &C::mlp_norm_eps, omitted_at_default(at_least(0)),
        "layers' pre-MLP norms (norm2); 0 = norm_eps");
  v.key("norm_f_eps", &C::norm_f_eps, omitted_at_default(at_least(0)),
        "norm_f, after the layers; 0 = norm_eps");
  v.key("init_std", &C::init_std, at_least(0), "weights ~ N(0, init_std²)");
  v.key("pattern", &C::pattern, letters("AMG"),
        "serial layer pattern, e.g. `MMMA` (A attention, M Mamba2, G GDN), repeated");
  v.key("fused_linear", &C::fused_linear, one_of("mamba2|gdn"), "fused: the mixer beside attention");
  v.key("vocab_chunk", &C::vocab_chunk, at_least(1), "LM-head vocabulary rows per pass");
  v.key("recompute", &C::recompute, anything(), "recompute activations in backward");
  v.section("mamba2", &C::mamba2);
  v.section("gdn", &C::gdn);
  v.section("amor", &C::amor);
  v.section("oryx", &C::oryx);
}

}  // namespace amor::model
