// The name table between amor-run and the AMOR authors' state dict, and the checked conversions.
//
// Where the authors' names come from (amor.py at HaoranZhengRaul/AMOR 005ce57, read through the
// code index; transformers' Mamba2 and fla's GatedDeltaNet as amor.py builds them):
//   confirmed in amor.py:  embed (Mamba2: the HF backbone's `embeddings` module assigned to
//     self.embed; GDN: nn.Embedding), lm_head (tied), ssd_layers (the HF backbone's `layers`),
//     mlp_norms, mlps, norm_f, layers.{i}.{norm_ssm, gdn, norm_mlp, mlp} (GDNBlock),
//     SwiGLUMLP.{gate,up,down}_proj, amor_blocks.{k}.{q_proj, kv_proj.k_proj, kv_proj.v_proj,
//     out_proj, raw_alpha, gate.running_threshold, gate.running_std}, amor_pre_norms.{k} (k >= 1;
//     slot 0 is None), final_norm, and RMSNorm's `weight`. RoPE's buffers are non-persistent.
//   transformers' Mamba2Block / Mamba2Mixer (modeling_mamba2.py; read in forks that keep HF's
//     Mamba2Mixer.__init__): Block.norm.weight, mixer.{in_proj.weight, conv1d.weight (nn.Conv1d,
//     groups = channels: [C,1,K]), conv1d.bias (use_conv_bias, on by default), dt_bias, A_log, D,
//     norm.weight (MambaRMSNormGated(intermediate_size)), out_proj.weight} (in/out_proj bias only
//     with use_bias, off by default); in_proj rows [z | x B C | dt] as ours.
//   fla's GatedDeltaNet layer (fla/layers/gated_deltanet.py; fla's own file is not in the index,
//     the attribute names were read in a fork that keeps fla's __init__ and in vendored copies of
//     fla's ShortConvolution): {q,k,v,a,b,g,o}_proj.weight (no biases), {q,k,v}_conv1d.weight
//     (ShortConvolution subclasses nn.Conv1d with groups = channels: [C,1,K]; bias only with
//     conv_bias, off by default), A_log, dt_bias, o_norm.weight (FusedRMSNormGated(head_v_dim)
//     with use_gate, the default). ASSUMED: that the fla release the authors used adds no
//     parameter at amor.py's defaults (an extra one is reported as unexpected, naming it).
#include "models/io/authors_layout.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kernels/core/error.h"

namespace amor::model {

namespace {

constexpr size_t kMaxListed = 20;  // problems named in one error; the rest are counted

const char* kMamba2Mixer[] = {"in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias",
                              "A_log",          "D",             "norm.weight", "out_proj.weight"};
const char* kGdnMixer[] = {"q_proj.weight", "q_conv1d.weight", "k_proj.weight", "k_conv1d.weight",
                           "v_proj.weight", "v_conv1d.weight", "a_proj.weight", "b_proj.weight",
                           "g_proj.weight", "o_proj.weight",   "A_log",         "dt_bias",
                           "o_norm.weight"};
const char* kMlp[] = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};

bool is_conv(const std::string& n) {
  const std::string tail = "conv1d.weight";
  return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
}

Shape their_shape(const AuthorsName& n, const Shape& ours) {
  return n.conv ? Shape{ours.at(0), 1, ours.at(1)} : ours;
}

[[noreturn]] void fail(const std::string& what, const std::string& verb, const std::vector<std::string>& problems) {
  std::string msg = fmt::format("{}: {} ({} problem{}):", what, verb, problems.size(), problems.size() == 1 ? "" : "s");
  for (size_t i = 0; i < problems.size() && i < kMaxListed; ++i) msg += "\n  " + problems[i];
  if (problems.size() > kMaxListed) msg += fmt::format("\n  ... and {} more", problems.size() - kMaxListed);
  throw Error(msg);
}

// A tensor's checks: shape, floating, the file's one dtype (the first tensor checked sets it).
void check_tensor(const std::string& name, const Tensor& t, const Shape& want, std::optional<DType>& dtype,
                  std::vector<std::string>& problems) {
  if (t.shape() != want)
    problems.push_back(fmt::format("tensor '{}' has shape {} in the file, expected {}", name, shape_str(t.shape()),
                                   shape_str(want)));
  else if (!is_floating(t.dtype()))
    problems.push_back(fmt::format("tensor '{}' is {}, expected a floating-point type", name, dtype_name(t.dtype())));
  else if (dtype && *dtype != t.dtype())
    problems.push_back(fmt::format("tensor '{}' is {} while the others are {}", name, dtype_name(t.dtype()),
                                   dtype_name(*dtype)));
  else
    dtype = t.dtype();
}

}  // namespace

std::vector<AuthorsName> authors_names(const ModelConfig& cfg) {
  AMOR_CHECK(cfg.kind == "amor", "the authors' layout is AMOR's: model.kind is '{}'", cfg.kind);
  AMOR_CHECK(cfg.amor.backbone == "mamba2" || cfg.amor.backbone == "gdn",
             "the authors' layout has backbones mamba2 and gdn, not '{}'", cfg.amor.backbone);
  const bool mamba = cfg.amor.backbone == "mamba2";
  std::vector<AuthorsName> t;
  auto add = [&](std::string ours, std::string theirs) {
    bool conv = is_conv(ours);
    t.push_back({std::move(ours), std::move(theirs), conv});
  };
  add("embed_tokens.weight", "embed.weight");
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const std::string o = fmt::format("layers.{}.", i);
    // Mamba2: transformers' block holds the mixer pre-norm; amor.py keeps the MLP lists beside it.
    const std::string th = mamba ? fmt::format("ssd_layers.{}.", i) : fmt::format("layers.{}.", i);
    add(o + "norm1.weight", th + (mamba ? "norm.weight" : "norm_ssm.weight"));
    if (mamba)
      for (const char* n : kMamba2Mixer) add(o + "mixer." + n, th + "mixer." + n);
    else
      for (const char* n : kGdnMixer) add(o + "mixer." + n, th + "gdn." + n);
    if (cfg.d_ff > 0) {
      add(o + "norm2.weight", mamba ? fmt::format("mlp_norms.{}.weight", i) : th + "norm_mlp.weight");
      for (const char* n : kMlp) add(o + "mlp." + n, (mamba ? fmt::format("mlps.{}.", i) : th + "mlp.") + n);
    }
  }
  add("norm_f.weight", "norm_f.weight");
  for (int64_t k = 0; k < cfg.amor.blocks; ++k) {
    const std::string o = fmt::format("amor.{}.", k), th = fmt::format("amor_blocks.{}.", k);
    if (k > 0) add(o + "norm.weight", fmt::format("amor_pre_norms.{}.weight", k));
    add(o + "attn.q_proj.weight", th + "q_proj.weight");
    add(o + "attn.k_proj.weight", th + "kv_proj.k_proj.weight");
    add(o + "attn.v_proj.weight", th + "kv_proj.v_proj.weight");
    add(o + "attn.o_proj.weight", th + "out_proj.weight");
    add(o + "alpha", th + "raw_alpha");
  }
  add("final_norm.weight", "final_norm.weight");
  return t;
}

std::pair<std::string, std::string> authors_gate_buffers(int64_t k) {
  return {fmt::format("amor_blocks.{}.gate.running_threshold", k), fmt::format("amor_blocks.{}.gate.running_std", k)};
}

OursWeights authors_to_ours(const SafetensorsFile& theirs, const ModelConfig& cfg, const ParamStore& ps,
                            const std::string& what) {
  const std::vector<AuthorsName> table = authors_names(cfg);
  std::map<std::string, const AuthorsName*> by_ours;
  for (const auto& n : table) by_ours[n.ours] = &n;
  std::vector<std::string> problems;
  std::set<std::string> used;
  std::optional<DType> dtype;
  OursWeights out;
  const Tensor* embed = theirs.find("embed.weight");
  const Tensor* head = theirs.find("lm_head.weight");
  for (const auto& p : ps.params()) {
    auto it = by_ours.find(p->name);
    if (it == by_ours.end()) {
      problems.push_back(fmt::format("amor-run's '{}' has no authors' name (models/io/authors_layout.cpp)", p->name));
      continue;
    }
    const AuthorsName& n = *it->second;
    std::string name = n.theirs;
    const Tensor* t = theirs.find(name);
    if (!t && name == "embed.weight" && head) t = head, name = "lm_head.weight";  // save_model kept the head's name
    if (!t) {
      problems.push_back(fmt::format("tensor '{}' (amor-run's '{}') is missing, expected shape {}", n.theirs, p->name,
                                     shape_str(their_shape(n, p->value.shape()))));
      continue;
    }
    used.insert(name);
    const size_t before = problems.size();
    check_tensor(name, *t, their_shape(n, p->value.shape()), dtype, problems);
    if (problems.size() == before) out.tensors.emplace_back(p->name, n.conv ? t->view(p->value.shape()) : *t);
  }
  if (embed && head) {  // both names: the tied head must be the embedding itself
    used.insert("lm_head.weight");
    if (head->shape() != embed->shape() || head->dtype() != embed->dtype() ||
        std::memcmp(head->raw_data(), embed->raw_data(), embed->nbytes()) != 0)
      problems.push_back("tensor 'lm_head.weight' differs from 'embed.weight' (the authors' head is tied to it)");
  }
  for (int64_t k = 0; k < cfg.amor.blocks; ++k) {
    auto [m_name, s_name] = authors_gate_buffers(k);
    double v[2] = {0, 0};
    int j = 0;
    for (const std::string& name : {m_name, s_name}) {
      const Tensor* t = theirs.find(name);
      if (!t)
        problems.push_back(fmt::format("buffer '{}' (block {}'s gate EMA) is missing, expected shape []", name, k));
      else if (t->numel() != 1 || t->dim() > 1 || !is_floating(t->dtype()))
        problems.push_back(fmt::format("buffer '{}' is {} {}, expected a floating-point scalar []", name,
                                       dtype_name(t->dtype()), shape_str(t->shape())));
      else
        v[j] = t->item(0);
      used.insert(name);
      ++j;
    }
    out.gates.push_back({v[0], v[1]});
  }
  for (const auto& [name, t] : theirs.tensors)
    if (!used.count(name))
      problems.push_back(fmt::format("unexpected tensor '{}' {} (not in the authors' layout of this config)", name,
                                     shape_str(t.shape())));
  if (!problems.empty()) fail(what, "the authors' state dict does not fit this model", problems);
  return out;
}

std::vector<std::pair<std::string, Tensor>> ours_to_authors(const SafetensorsFile& ours,
                                                            const std::vector<AmorGateState>& gates,
                                                            const ModelConfig& cfg, const ParamStore& ps,
                                                            const std::string& what) {
  const std::vector<AuthorsName> table = authors_names(cfg);
  std::map<std::string, Shape> shapes;
  for (const auto& p : ps.params()) shapes[p->name] = p->value.shape();
  std::vector<std::string> problems;
  std::optional<DType> dtype;
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> known;
  for (const auto& n : table) {
    known.insert(n.ours);
    auto s = shapes.find(n.ours);
    if (s == shapes.end()) {
      problems.push_back(fmt::format("the authors' '{}' has no amor-run parameter '{}' in this model", n.theirs, n.ours));
      continue;
    }
    const Tensor* t = ours.find(n.ours);
    if (!t) {
      problems.push_back(fmt::format("tensor '{}' is missing (the model's shape is {})", n.ours, shape_str(s->second)));
      continue;
    }
    const size_t before = problems.size();
    check_tensor(n.ours, *t, s->second, dtype, problems);
    if (problems.size() != before) continue;
    out.emplace_back(n.theirs, n.conv ? t->view(their_shape(n, t->shape())) : *t);
    if (n.ours == "embed_tokens.weight") out.emplace_back("lm_head.weight", *t);  // state_dict lists the tie twice
  }
  for (const auto& [name, t] : ours.tensors)
    if (!known.count(name))
      problems.push_back(fmt::format("unexpected tensor '{}' {} (not a parameter of this model)", name, shape_str(t.shape())));
  if (static_cast<int64_t>(gates.size()) != cfg.amor.blocks)
    problems.push_back(fmt::format("{} gate states for {} blocks", gates.size(), cfg.amor.blocks));
  if (!problems.empty()) fail(what, "the weights do not fit this model", problems);
  // torch keeps the buffers f32 (torch.tensor(0.3)); an f64 file keeps them f64 so nothing rounds.
  const bool f64 = dtype && *dtype == DType::F64;
  for (int64_t k = 0; k < cfg.amor.blocks; ++k) {
    auto [m_name, s_name] = authors_gate_buffers(k);
    const AmorGateState& g = gates[static_cast<size_t>(k)];
    if (f64) {
      out.emplace_back(m_name, Tensor::from_vector<double>({}, {g.m}));
      out.emplace_back(s_name, Tensor::from_vector<double>({}, {g.s}));
    } else {
      out.emplace_back(m_name, Tensor::from_vector<float>({}, {static_cast<float>(g.m)}));
      out.emplace_back(s_name, Tensor::from_vector<float>({}, {static_cast<float>(g.s)}));
    }
  }
  return out;
}

}  // namespace amor::model
