// Writes tiny models of every kind with their inputs, outputs and gradients, for the PyTorch
// reference models (tests/torch_model_oracle.py). Per case, a folder with
//   config.json         the ModelConfig
//   weights.safetensors the parameters (double)
//   batch.safetensors   tokens, targets, dloss (the per-token loss weights handed to backward)
//   ours.safetensors    token_loss, entropy, [gate.i, gate_entropy.i, modes], grad.<param name>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "models/core/config_json.h"
#include "models/io/safetensors.h"
#include "models/lm/language_model.h"
#include "tests/common/random.h"

using namespace amor;
using namespace amor::model;

namespace {

ModelConfig tiny(const std::string& kind) {
  ModelConfig c;
  c.kind = kind;
  c.vocab = 17;
  c.d_model = 16;
  c.head_dim = 8;
  c.n_layers = 2;
  c.d_ff = 24;
  c.vocab_chunk = 6;
  c.init_std = 0.3;
  c.mamba2.head_dim = 8;  // d_inner 32 -> 4 heads
  c.mamba2.d_state = 8;
  c.mamba2.chunk = 4;     // T = 9: the last chunk is partial
  c.gdn.head_dim = 4;     // 0.5 * 16 / 4 -> 2 heads, V = 8
  c.gdn.qk_ratio = 0.5;
  c.gdn.chunk = 4;
  c.oryx.chunk = 2;  // several mode switches within T = 9
  return c;
}

void dump(const std::string& root, const std::string& name, const ModelConfig& cfg, uint64_t seed,
          bool perturb_zero_init = false) {
  std::string dir = root + "/" + name;
  std::filesystem::create_directories(dir);
  auto model = build_model(cfg, DType::F64);
  model->params().initialize(seed);
  if (perturb_zero_init) {  // give zero-initialised parameters (AMOR's O, alpha) random values
    uint64_t k = seed;
    for (auto& p : model->params().params()) {
      bool all_zero = true;
      for (int64_t i = 0; i < p->value.numel() && all_zero; ++i) all_zero = p->value.item(i) == 0.0;
      if (all_zero) {
        p->value.copy_from(testing::randn(p->value.shape(), ++k, DType::F64, 0.3));
        ++p->version;  // param_store.h: every write of a value counts
      }
    }
  }
  const int64_t B = 2, T = 9;
  Batch batch{testing::randint({B, T}, seed + 1, cfg.vocab), testing::randint({B, T}, seed + 2, cfg.vocab)};
  batch.targets.data<int32_t>()[4] = -100;
  Tensor dloss = testing::randn({B, T}, seed + 3);
  model->params().zero_grad();
  StepOutput out = model->forward(batch, true);
  model->backward(dloss);
  std::vector<std::pair<std::string, Tensor>> weights, ours;
  for (auto& p : model->params().params()) {
    weights.emplace_back(p->name, p->value);
    ours.emplace_back("grad." + p->name, p->grad);
  }
  ours.emplace_back("token_loss", out.token_loss);
  ours.emplace_back("entropy", out.entropy);
  for (size_t i = 0; i < out.gates.size(); ++i) {
    ours.emplace_back("gate." + std::to_string(i), out.gates[i]);
    ours.emplace_back("gate_entropy." + std::to_string(i), out.gate_entropy[i]);
  }
  if (out.modes.defined()) ours.emplace_back("modes", out.modes);
  save_safetensors(dir + "/weights.safetensors", weights);
  save_safetensors(dir + "/batch.safetensors",
                   {{"tokens", batch.tokens}, {"targets", batch.targets}, {"dloss", dloss}});
  save_safetensors(dir + "/ours.safetensors", ours);
  std::ofstream(dir + "/config.json") << to_json(cfg).dump() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  std::string root = argv[1];
  std::filesystem::remove_all(root);
  try {
    dump(root, "transformer", tiny("transformer"), 100);
    ModelConfig gqa = tiny("transformer");
    gqa.n_kv_heads = 1;
    gqa.d_ff = 0;
    dump(root, "transformer_gqa_nomlp", gqa, 200);
    dump(root, "mamba2", tiny("mamba2"), 300);
    ModelConfig serial = tiny("serial");
    serial.pattern = "MA";
    serial.mamba2.n_groups = 2;
    dump(root, "serial_MA_groups2", serial, 400);
    dump(root, "gdn", tiny("gdn"), 500);
    ModelConfig sga = tiny("serial");
    sga.pattern = "GA";
    dump(root, "serial_GA", sga, 600);
    dump(root, "oryx_gdn", tiny("oryx"), 700);
    ModelConfig om = tiny("oryx");
    om.oryx.linear = "mamba2";
    dump(root, "oryx_mamba2", om, 800);
    for (const char* linear : {"mamba2", "gdn"}) {
      ModelConfig f = tiny("fused");
      f.fused_linear = linear;
      dump(root, std::string("fused_") + linear, f, 850);
    }
    // AMOR from its init EMA state, one training forward. o_proj starts at zero, which would
    // leave q/k/v without gradient: the init_std of every matrix is large, and O is re-drawn.
    for (const char* backbone : {"gdn", "mamba2"}) {
      ModelConfig a = tiny("amor");
      a.amor.backbone = backbone;
      dump(root, std::string("amor_") + backbone, a, 900, /*perturb_zero_init=*/true);
    }
    // Every norm location with an epsilon of its own (models/core/norm_eps.h), each large and
    // distinct, so that a norm given another location's epsilon fails the 1e-10 comparison.
    for (const char* backbone : {"gdn", "mamba2"}) {
      ModelConfig a = tiny("amor");
      a.amor.backbone = backbone;
      a.amor.blocks = 3;
      a.mixer_norm_eps = 0.05;
      a.mlp_norm_eps = 0.2;
      a.norm_f_eps = 0.01;
      a.amor.norm_eps = 0.3;
      a.mamba2.norm_eps = 0.07;
      a.gdn.norm_eps = 0.15;
      dump(root, std::string("amor_") + backbone + "_eps", a, 950, /*perturb_zero_init=*/true);
    }
    ModelConfig fe = tiny("fused");  // fused's own norms keep model.norm_eps
    fe.norm_eps = 0.02;
    fe.mixer_norm_eps = 0.05;
    fe.mlp_norm_eps = 0.2;
    fe.norm_f_eps = 0.01;
    fe.mamba2.norm_eps = 0.07;
    dump(root, "fused_mamba2_eps", fe, 975);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_oracle_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
