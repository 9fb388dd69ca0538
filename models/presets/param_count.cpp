#include "models/presets/param_count.h"

#include "kernels/core/error.h"
#include "models/amor/amor_model.h"
#include "models/lm/language_model.h"
#include "models/mixers/fused_mixer.h"
#include "models/mixers/gdn_mixer.h"

namespace amor::model {

namespace {

int64_t attention(const ModelConfig& c) {
  AMOR_CHECK(c.head_dim > 0 && c.d_model % c.head_dim == 0,
             "model: d_model {} is not a multiple of head_dim {}", c.d_model, c.head_dim);
  const int64_t heads = c.d_model / c.head_dim;
  const int64_t kv = c.n_kv_heads > 0 ? c.n_kv_heads : heads;
  AMOR_CHECK(heads % kv == 0, "model: {} attention heads are not a multiple of n_kv_heads {}",
             heads, kv);
  const int64_t d = c.d_model;
  return 2 * d * d + 2 * kv * c.head_dim * d;  // q, o [d,d]; k, v [kv*hd, d]
}

int64_t mamba2(const ModelConfig& c) {
  const Mamba2Config& m = c.mamba2;
  const int64_t d = c.d_model, di = m.expand * d;
  AMOR_CHECK(m.expand >= 1, "model.mamba2.expand is {}, expected >= 1", m.expand);
  AMOR_CHECK(m.head_dim > 0 && di % m.head_dim == 0,
             "model.mamba2.head_dim {} does not divide d_inner = expand * d_model = {}",
             m.head_dim, di);
  const int64_t H = di / m.head_dim, gn = m.n_groups * m.d_state, conv = di + 2 * gn;
  return (2 * di + 2 * gn + H) * d      // in_proj
         + conv * m.conv_kernel + conv  // conv1d weight, bias
         + 3 * H                        // dt_bias, A_log, D
         + di                           // norm
         + d * di;                      // out_proj
}

int64_t gdn(const ModelConfig& c) {
  const GdnDims g = gdn_dims(c);
  const int64_t d = c.d_model, qk = g.heads * g.head_k, v = g.heads * g.head_v;
  return 2 * qk * d + 2 * v * d          // q, k, v, g projections
         + 2 * g.heads * d               // a, b projections
         + d * v                         // o_proj
         + (2 * qk + v) * c.gdn.conv_kernel  // q, k, v convs (no bias)
         + 2 * g.heads                   // A_log, dt_bias
         + g.head_v;                     // o_norm
}

int64_t oryx(const ModelConfig& c) {
  const std::string& lin = c.oryx.linear;
  AMOR_CHECK(lin == "gdn" || lin == "mamba2", "model.oryx.linear: '{}' is not one of gdn, mamba2",
             lin);
  AMOR_CHECK(c.head_dim > 0 && c.d_model % c.head_dim == 0,
             "model.head_dim: oryx needs a head_dim dividing d_model, got d_model {} and head_dim {}",
             c.d_model, c.head_dim);
  const int64_t d = c.d_model, H = d / c.head_dim;
  const int64_t kc = lin == "gdn" ? c.gdn.conv_kernel : c.mamba2.conv_kernel;
  const int64_t path = lin == "gdn" ? 2 * H * d + 2 * H  // a, b projections; A_log, dt_bias
                                    : H * d + 3 * H;     // dt_proj; A_log, dt_bias, D
  return 6 * d * d      // q_attn, q_lin, k, v, g, o projections
         + 3 * d * kc   // q_lin, k, v convs
         + c.head_dim   // o_norm
         + path;
}

int64_t layer(char letter, const ModelConfig& c) {
  const int64_t d = c.d_model;
  return d + count_mixer_parameters(letter, c) + (c.d_ff > 0 ? d + 3 * d * c.d_ff : 0);
}

}  // namespace

int64_t count_mixer_parameters(char letter, const ModelConfig& c) {
  switch (letter) {
    case 'A': return attention(c);
    case 'M': return mamba2(c);
    case 'G': return gdn(c);
    case 'F': return attention(c) + count_mixer_parameters(fused_linear_letter(c), c) + 2 * c.d_model;
    case 'O': return oryx(c);
    default:
      throw Error(fmt::format("model: unknown mixer '{}' (use A, M, G, F or O)", letter));
  }
}

int64_t count_parameters(const ModelConfig& c) {
  AMOR_CHECK(c.vocab > 0 && c.d_model > 0 && c.n_layers >= 0 && c.d_ff >= 0,
             "model: vocab {}, d_model {}, n_layers {}, d_ff {}: expected positive sizes", c.vocab,
             c.d_model, c.n_layers, c.d_ff);
  const int64_t d = c.d_model;
  int64_t n = c.vocab * d + d;  // tied embedding/head; norm_f
  std::string letters;
  if (c.kind == "fused")
    letters.assign(static_cast<size_t>(c.n_layers), 'F');
  else if (c.kind == "oryx")
    letters.assign(static_cast<size_t>(c.n_layers), 'O');
  else if (c.kind == "amor")
    letters.assign(static_cast<size_t>(c.n_layers), amor_backbone_letter(c));
  else if (c.kind == "transformer" || c.kind == "mamba2" || c.kind == "gdn" || c.kind == "serial")
    letters = layer_pattern(c);
  else
    throw Error(fmt::format(
        "model.kind: unknown kind '{}' (transformer, mamba2, gdn, serial, fused, amor, oryx)",
        c.kind));
  for (char l : letters) n += layer(l, c);
  if (c.kind == "amor") {
    const int64_t K = c.amor.blocks;
    AMOR_CHECK(K == 1 || K == 3, "model.amor.blocks: {} AMOR blocks; the paper's variants have 1 or 3",
               K);
    n += K * (attention(c) + d)  // q,k,v,o and alpha per block
         + (K - 1) * d           // blocks >= 1 have their own norm
         + d;                    // final_norm
  }
  return n;
}

}  // namespace amor::model
