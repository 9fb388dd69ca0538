// The C++ AMOR model against the PyTorch reference (tests/torch_ref/amor.py, autograd for the
// gradients): writes cases into a temporary folder and runs tests/amor_check.py on them, which
// requires identical gates and relative RMS <= 1e-10 on losses, entropies, thresholds, EMA state
// and every parameter's gradient (double). Cases: both residual modes, K = 1 and 3, adaptive and
// fixed offsets, training and eval, GQA, transformer/GDN/Mamba2 backbones, and a second training step continuing the EMA.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/amor/amor_test_support.h"
#include "models/core/config_json.h"
#include "models/io/safetensors.h"

namespace amor::model {
namespace {

using namespace testing_amor;
namespace fs = std::filesystem;

ModelConfig oracle_config(const std::string& mode, int64_t blocks, const std::string& offset,
                          const std::string& backbone = "transformer") {
  ModelConfig c = tiny_amor(mode, blocks, offset, backbone);
  c.vocab = 17;
  c.d_model = 16;
  c.head_dim = 8;
  c.d_ff = 24;
  c.vocab_chunk = 6;
  c.mamba2.head_dim = 8;  // d_inner 32 -> 4 heads
  return c;
}

Tensor state_tensor(const std::vector<AmorGateState>& s) {
  std::vector<double> v;
  for (auto& x : s) {
    v.push_back(x.m);
    v.push_back(x.s);
  }
  return Tensor::from_vector<double>({static_cast<int64_t>(s.size()), 2}, v);
}

// Runs one forward/backward of model on batch from its current gate state and writes the case.
void write_case(const fs::path& dir, AmorModel& model, const Batch& batch, bool training,
                uint64_t seed) {
  fs::create_directories(dir);
  const ModelConfig& cfg = model.config();
  Tensor dloss = testing::randn(batch.tokens.shape(), seed);
  std::vector<AmorGateState> before = model.gate_state();
  model.params().zero_grad();
  StepOutput out = model.forward(batch, training);
  model.backward(dloss);
  double margin = 1e300;
  for (size_t i = 0; i < out.tau.size(); ++i)
    for (double h : out.gate_entropy[i].to_vector<double>())
      margin = std::min(margin, std::abs(h - out.tau[i]));
  ASSERT_GT(margin, 1e-8) << dir << ": an entropy sits at its threshold; pick another seed";

  std::vector<std::pair<std::string, Tensor>> weights, ours;
  for (auto& p : model.params().params()) {
    weights.emplace_back(p->name, p->value);
    ours.emplace_back("grad." + p->name, p->grad);
  }
  ours.emplace_back("token_loss", out.token_loss);
  ours.emplace_back("entropy", out.entropy);
  for (size_t i = 0; i < out.gates.size(); ++i) {
    ours.emplace_back("gate." + std::to_string(i), out.gates[i]);
    ours.emplace_back("gate_entropy." + std::to_string(i), out.gate_entropy[i]);
  }
  ours.emplace_back("tau", Tensor::from_vector<double>({static_cast<int64_t>(out.tau.size())}, out.tau));
  ours.emplace_back("ema_after", state_tensor(model.gate_state()));
  save_safetensors((dir / "weights.safetensors").string(), weights);
  save_safetensors((dir / "batch.safetensors").string(),
                   {{"tokens", batch.tokens},
                    {"targets", batch.targets},
                    {"dloss", dloss},
                    {"ema_before", state_tensor(before)},
                    {"training", Tensor::full<uint8_t>({1}, training ? 1 : 0)}});
  save_safetensors((dir / "ours.safetensors").string(), ours);
  std::ofstream(dir / "config.json") << to_json(cfg).dump() << "\n";
}

void add_case(const fs::path& root, const std::string& name, ModelConfig cfg, bool training,
              uint64_t seed, bool second_step = false) {
  AmorModel model(cfg, DType::F64);
  model.params().initialize(seed);
  perturb_amor_weights(model.params(), seed + 1);
  Batch batch = tiny_batch(cfg, 2, 9, seed + 2);
  Calibrated cal = calibrate_gates(model, batch, training);
  ASSERT_GT(cal.margin, 1e-4) << name;
  if (second_step) {  // a first step moves the EMA; the written case is the step after it
    model.forward(batch, training);
    batch = tiny_batch(cfg, 2, 9, seed + 3);
  }
  write_case(root / name, model, batch, training, seed + 4);
}

TEST(AmorTorchReference, MatchesCppInDouble) {
  fs::path repo = fs::path(AMOR_SOURCE_DIR);
  fs::path root = fs::temp_directory_path() / ("amor_check." + std::to_string(getpid()));
  fs::remove_all(root);
  add_case(root, "classic_k3_adaptive_train", oracle_config("classic", 3, "adaptive"), true, 100);
  add_case(root, "h_k3_adaptive_train", oracle_config("h", 3, "adaptive"), true, 200);
  add_case(root, "classic_k1_fixed_train", oracle_config("classic", 1, "fixed"), true, 300);
  ModelConfig gqa = oracle_config("h", 1, "adaptive");
  gqa.n_kv_heads = 1;
  add_case(root, "h_k1_gqa_eval", gqa, false, 400);
  add_case(root, "gdn_classic_k3_train", oracle_config("classic", 3, "adaptive", "gdn"), true, 600);
  add_case(root, "mamba2_h_k3_train", oracle_config("h", 3, "adaptive", "mamba2"), true, 700);
  add_case(root, "classic_k3_second_step", oracle_config("classic", 3, "adaptive"), true, 500, true);
  ASSERT_FALSE(HasFailure());
  std::string cmd = std::string(AMOR_PYTHON) + " '" + (repo / "tests" / "amor_check.py").string() + "' '" +
                    root.string() + "'";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << " failed; the cases are kept in " << root;
  if (rc == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace amor::model
