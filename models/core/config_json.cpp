#include "models/core/config_json.h"

namespace amor::model {

using json::Object;
using json::Value;

json::Value to_json(const ModelConfig& c) {
  Object mamba2{{"d_state", Value(c.mamba2.d_state)},     {"expand", Value(c.mamba2.expand)},
                {"head_dim", Value(c.mamba2.head_dim)},   {"n_groups", Value(c.mamba2.n_groups)},
                {"conv_kernel", Value(c.mamba2.conv_kernel)}, {"chunk", Value(c.mamba2.chunk)}};
  Object gdn{{"head_dim", Value(c.gdn.head_dim)},       {"qk_ratio", Value(c.gdn.qk_ratio)},
             {"v_expand", Value(c.gdn.v_expand)},       {"conv_kernel", Value(c.gdn.conv_kernel)},
             {"chunk", Value(c.gdn.chunk)},             {"norm_eps", Value(c.gdn.norm_eps)}};
  Object amor{{"backbone", Value(c.amor.backbone)},     {"blocks", Value(c.amor.blocks)},
              {"residual_mode", Value(c.amor.residual_mode)},
              {"offset_mode", Value(c.amor.offset_mode)}, {"kappa", Value(c.amor.kappa)},
              {"momentum", Value(c.amor.momentum)},     {"m_init", Value(c.amor.m_init)},
              {"s_init", Value(c.amor.s_init)},         {"fixed_offset", Value(c.amor.fixed_offset)}};
  Object oryx{{"linear", Value(c.oryx.linear)}, {"chunk", Value(c.oryx.chunk)},
              {"p_attention", Value(c.oryx.p_attention)}, {"schedule", Value(c.oryx.schedule)}};
  Object o{{"kind", Value(c.kind)},
           {"vocab", Value(c.vocab)},
           {"d_model", Value(c.d_model)},
           {"n_layers", Value(c.n_layers)},
           {"d_ff", Value(c.d_ff)},
           {"head_dim", Value(c.head_dim)},
           {"n_kv_heads", Value(c.n_kv_heads)},
           {"rope_base", Value(c.rope_base)},
           {"norm_eps", Value(c.norm_eps)},
           {"init_std", Value(c.init_std)},
           {"pattern", Value(c.pattern)},
           {"fused_linear", Value(c.fused_linear)},
           {"vocab_chunk", Value(c.vocab_chunk)},
           {"recompute", Value(c.recompute)},
           {"mamba2", Value(std::move(mamba2))},
           {"gdn", Value(std::move(gdn))},
           {"amor", Value(std::move(amor))},
           {"oryx", Value(std::move(oryx))}};
  return Value(std::move(o));
}

}  // namespace amor::model
