// The model part of a run's config (`model.*` keys). Defaults follow design §3; every detail a
// paper leaves open is a field here with its default documented beside it.
#pragma once
#include <cstdint>
#include <string>

namespace amor::model {

struct Mamba2Config {
  int64_t d_state = 128;    // N
  int64_t expand = 2;       // d_inner = expand * d
  int64_t head_dim = 64;    // P; H = d_inner / head_dim
  int64_t n_groups = 1;     // G
  int64_t conv_kernel = 4;
  int64_t chunk = 64;       // SSD chunk length
  double dt_min = 1e-3, dt_max = 0.1, dt_floor = 1e-4;
  double a_min = 1.0, a_max = 16.0;  // A_log = log(U[a_min, a_max])
};

struct GdnConfig {
  int64_t head_dim = 64;     // K; H = round(qk_ratio * d / head_dim)
  double qk_ratio = 0.75;    // H*K = 0.75 d (fla's GatedDeltaNet: expand_k 0.75)
  double v_expand = 2.0;     // V = v_expand * K per head
  int64_t conv_kernel = 4;
  int64_t chunk = 64;
  double norm_eps = 1e-5;    // output gated RMSNorm
  double dt_min = 1e-3, dt_max = 0.1, dt_floor = 1e-4;
  double a_min = 0.0, a_max = 16.0;  // A_log = log(U[a_min, a_max]) as fla
};

struct AmorConfig {
  std::string backbone = "gdn";          // gdn | mamba2
  int64_t blocks = 3;                    // K = 1 or 3
  std::string residual_mode = "classic"; // classic | h
  std::string offset_mode = "adaptive";  // adaptive: tau = m + kappa*s; fixed: tau = m + fixed_offset
  double kappa = 0.2;
  double momentum = 0.99;
  double m_init = 0.3, s_init = 0.1;
  double fixed_offset = 0.03;
};

struct OryxConfig {
  std::string linear = "gdn";       // gdn (Oryx-TG) | mamba2 (Oryx-TM)
  int64_t chunk = 128;              // training: each chunk of this many tokens gets one mixer
  double p_attention = 0.5;         // probability a training chunk uses attention
  std::string schedule = "attention";  // inference: attention | linear | prefill_linear_decode_attention | segments
};

struct ModelConfig {
  std::string kind = "transformer";  // transformer | mamba2 | gdn | serial | fused | amor | oryx
  int64_t vocab = 256;
  int64_t d_model = 64;
  int64_t n_layers = 2;
  int64_t d_ff = 0;            // SwiGLU hidden size; 0 = mixer-only layers (no MLP)
  int64_t head_dim = 64;       // attention head dim
  int64_t n_kv_heads = 0;      // 0 = MHA (as many KV heads as query heads)
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
  double init_std = 0.02;
  std::string pattern;         // serial: e.g. "MMMA" (A attention, M Mamba2, G GDN), repeated
  std::string fused_linear = "mamba2";  // fused: the recurrent mixer beside attention
  int64_t vocab_chunk = 8192;  // fused LM head + loss works over this many vocabulary rows at once
  bool recompute = false;      // recompute each layer's activations in backward
  Mamba2Config mamba2;
  GdnConfig gdn;
  AmorConfig amor;
  OryxConfig oryx;
};

}  // namespace amor::model
