#include "models/presets/param_count.h"

#include <climits>
#include <cstdint>
#include <utility>

#include "kernels/core/error.h"
#include "models/amor/amor_model.h"
#include "models/lm/language_model.h"
#include "models/mixers/fused_mixer.h"
#include "models/mixers/gdn_mixer.h"
#include "models/oryx/oryx_modes.h"

namespace amor::model {

namespace {
// Sizes are counted in 128 bits: count_parameters bounds every input size by 2^40, so no product
// of up to three of them overflows, and refuses totals beyond 64 bits (never a negative count).
using I = __int128;
constexpr int64_t kMaxSize = int64_t{1} << 40;

I mixer(char letter, const ModelConfig& c);

I attention(const ModelConfig& c) {
  AMOR_CHECK(c.head_dim > 0 && c.d_model % c.head_dim == 0,
             "model: d_model {} is not a multiple of head_dim {}", c.d_model, c.head_dim);
  const I heads = c.d_model / c.head_dim;
  const I kv = c.n_kv_heads > 0 ? c.n_kv_heads : heads;
  AMOR_CHECK(heads % kv == 0, "model: {} attention heads are not a multiple of n_kv_heads {}",
             static_cast<long long>(heads), static_cast<long long>(kv));
  const I d = c.d_model;
  return 2 * d * d + 2 * kv * c.head_dim * d;  // q, o [d,d]; k, v [kv*hd, d]
}

I mamba2(const ModelConfig& c) {
  const Mamba2Config& m = c.mamba2;
  const I d = c.d_model, di = m.expand * d;
  AMOR_CHECK(m.expand >= 1, "model.mamba2.expand is {}, expected >= 1", m.expand);
  AMOR_CHECK(m.head_dim > 0 && di % m.head_dim == 0,
             "model.mamba2.head_dim {} does not divide d_inner = expand * d_model = {:.0f}",
             m.head_dim, static_cast<double>(di));
  const I H = di / m.head_dim, gn = I{m.n_groups} * m.d_state, conv = di + 2 * gn;
  AMOR_CHECK(m.n_groups > 0 && H % m.n_groups == 0,
             "model.mamba2.n_groups {} does not divide the {} Mamba2 heads", m.n_groups,
             static_cast<long long>(H));
  return (2 * di + 2 * gn + H) * d      // in_proj
         + conv * m.conv_kernel + conv  // conv1d weight, bias
         + 3 * H                        // dt_bias, A_log, D
         + di                           // norm
         + d * di;                      // out_proj
}

I gdn(const ModelConfig& c) {
  const GdnDims g = gdn_dims(c);
  const I d = c.d_model, qk = I{g.heads} * g.head_k, v = I{g.heads} * g.head_v;
  return 2 * qk * d + 2 * v * d          // q, k, v, g projections
         + 2 * I{g.heads} * d               // a, b projections
         + d * v                         // o_proj
         + (2 * qk + v) * c.gdn.conv_kernel  // q, k, v convs (no bias)
         + 2 * g.heads                   // A_log, dt_bias
         + g.head_v;                     // o_norm
}

I oryx(const ModelConfig& c) {
  const std::string& lin = c.oryx.linear;
  AMOR_CHECK(lin == "gdn" || lin == "mamba2", "model.oryx.linear: '{}' is not one of gdn, mamba2",
             lin);
  validate_oryx_config(c.oryx);  // chunk, p_attention, schedule: as the Oryx mixer checks them
  AMOR_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && c.d_model % c.head_dim == 0,
             "model.head_dim: oryx needs an even head_dim dividing d_model, got d_model {} and "
             "head_dim {}",
             c.d_model, c.head_dim);
  AMOR_CHECK(c.n_kv_heads == 0 || c.n_kv_heads == c.d_model / c.head_dim,
             "model.n_kv_heads is {}; oryx's heads are shared with the linear mixer, so it has "
             "MHA only (n_kv_heads 0)",
             c.n_kv_heads);
  const I d = c.d_model, H = d / c.head_dim;
  const I kc = lin == "gdn" ? c.gdn.conv_kernel : c.mamba2.conv_kernel;
  const I path = lin == "gdn" ? 2 * H * d + 2 * H  // a, b projections; A_log, dt_bias
                                    : H * d + 3 * H;     // dt_proj; A_log, dt_bias, D
  return 6 * d * d      // q_attn, q_lin, k, v, g, o projections
         + 3 * d * kc   // q_lin, k, v convs
         + c.head_dim   // o_norm
         + path;
}

I layer(char letter, const ModelConfig& c) {
  const I d = c.d_model;
  return d + mixer(letter, c) + (c.d_ff > 0 ? d + 3 * d * c.d_ff : 0);
}

}  // namespace

namespace {

I mixer(char letter, const ModelConfig& c) {
  switch (letter) {
    case 'A': return attention(c);
    case 'M': return mamba2(c);
    case 'G': return gdn(c);
    case 'F': return attention(c) + mixer(fused_linear_letter(c), c) + 2 * I{c.d_model};
    case 'O': return oryx(c);
    default:
      throw Error(fmt::format("model: unknown mixer '{}' (use A, M, G, F or O)", letter));
  }
}

// The sizes a count multiplies, each at most kMaxSize (a model beyond that cannot exist).
void check_sizes(const ModelConfig& c) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"model.vocab", c.vocab}, {"model.d_model", c.d_model},
      {"model.d_ff", c.d_ff}, {"model.head_dim", c.head_dim}, {"model.n_kv_heads", c.n_kv_heads},
      {"model.mamba2.d_state", c.mamba2.d_state}, {"model.mamba2.expand", c.mamba2.expand},
      {"model.mamba2.head_dim", c.mamba2.head_dim}, {"model.mamba2.n_groups", c.mamba2.n_groups},
      {"model.mamba2.conv_kernel", c.mamba2.conv_kernel}, {"model.gdn.head_dim", c.gdn.head_dim},
      {"model.gdn.conv_kernel", c.gdn.conv_kernel}, {"model.amor.blocks", c.amor.blocks}};
  for (const auto& [k, v] : sizes)
    AMOR_CHECK(v <= kMaxSize, "{} is {}, beyond any model that can exist (at most 2^40)", k, v);
  AMOR_CHECK(c.n_layers <= int64_t{1} << 20,
             "model.n_layers is {}, more layers than any model that can exist (at most 2^20)",
             c.n_layers);
  AMOR_CHECK(c.gdn.qk_ratio * static_cast<double>(c.d_model) <= static_cast<double>(kMaxSize),
             "model.gdn.qk_ratio {} * d_model {} is beyond any model that can exist",
             c.gdn.qk_ratio, c.d_model);
  AMOR_CHECK(c.gdn.v_expand * static_cast<double>(c.gdn.head_dim) <= static_cast<double>(kMaxSize),
             "model.gdn.v_expand {} * gdn.head_dim {} is beyond any model that can exist",
             c.gdn.v_expand, c.gdn.head_dim);
}

int64_t to_count(I n) {
  AMOR_CHECK(n >= 0 && n <= I{INT64_MAX}, "model: the parameter count ({:.3g}) overflows 64 bits",
             static_cast<double>(n));
  return static_cast<int64_t>(n);
}

}  // namespace

int64_t count_mixer_parameters(char letter, const ModelConfig& c) {
  check_sizes(c);
  return to_count(mixer(letter, c));
}

int64_t count_parameters(const ModelConfig& c) {
  AMOR_CHECK(c.vocab > 0 && c.d_model > 0 && c.n_layers >= 0 && c.d_ff >= 0,
             "model: vocab {}, d_model {}, n_layers {}, d_ff {}: expected positive sizes", c.vocab,
             c.d_model, c.n_layers, c.d_ff);
  check_sizes(c);
  const I d = c.d_model;
  I n = c.vocab * d + d;  // tied embedding/head; norm_f
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
  for (char l : letters) {
    n += layer(l, c);
    AMOR_CHECK(n <= I{INT64_MAX}, "model: {} layers of this width have more parameters than 64 bits count",
               c.n_layers);
  }
  if (c.kind == "amor") {
    const I K = c.amor.blocks;
    AMOR_CHECK(K == 1 || K == 3, "model.amor.blocks: {} AMOR blocks; the paper's variants have 1 or 3",
               c.amor.blocks);
    n += K * (attention(c) + d)  // q,k,v,o and alpha per block
         + (K - 1) * d           // blocks >= 1 have their own norm
         + d;                    // final_norm
  }
  return to_count(n);
}

}  // namespace amor::model
