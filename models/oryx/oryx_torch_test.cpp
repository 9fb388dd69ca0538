// OryxMixer against the PyTorch reference (tests/torch_ref/oryx.py, step-by-step recurrences):
// writes cases (config, weights, x, modes, dy, our y, dx and parameter gradients) to a temporary
// folder and runs tests/oryx_check.py on it with Debian's python3 + torch; in double everything
// must agree to relative RMS 1e-10.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/core/config_json.h"
#include "models/io/safetensors.h"
#include "models/oryx/oryx_mixer.h"
#include "models/oryx/oryx_test_support.h"
#include "tests/common/random.h"

namespace amor::model {
namespace {

namespace fs = std::filesystem;
using testing_oryx::modes_of;
using testing_oryx::tiny_oryx;

const fs::path kRepo = fs::path(AMOR_SOURCE_DIR);
const std::string kPrefix = "layers.1.mixer";

void write_case(const fs::path& dir, const ModelConfig& cfg, const Tensor& modes, uint64_t seed) {
  fs::create_directories(dir);
  ParamStore ps(DType::F64);
  OryxMixer mixer(ps, kPrefix, cfg);
  ps.initialize(seed);
  Tensor x = testing::randn({modes.size(0), modes.size(1), cfg.d_model}, seed + 1);
  Tensor dy = testing::randn(x.shape(), seed + 2);
  MixerContext ctx;
  ctx.modes = modes;
  ps.zero_grad();
  Tensor y = mixer.forward(x, ctx);
  Tensor dx = mixer.backward(dy);
  std::vector<std::pair<std::string, Tensor>> weights, ours{{"y", y}, {"dx", dx}};
  for (auto& p : ps.params()) {
    weights.emplace_back(p->name, p->value);
    ours.emplace_back("grad." + p->name, p->grad);
  }
  save_safetensors((dir / "weights.safetensors").string(), weights);
  save_safetensors((dir / "inputs.safetensors").string(), {{"x", x}, {"modes", modes}, {"dy", dy}});
  save_safetensors((dir / "ours.safetensors").string(), ours);
  std::ofstream(dir / "config.json") << to_json(cfg).dump() << "\n";
  std::ofstream(dir / "prefix.txt") << kPrefix << "\n";
}

TEST(OryxTorch, MixerMatchesThePyTorchReference) {
  fs::path root = fs::temp_directory_path() / ("oryx_check_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const std::vector<std::string> mixed = {"111000111", "000111000"};
  write_case(root / "gdn_mixed", tiny_oryx("gdn"), modes_of(mixed), 100);
  write_case(root / "mamba2_mixed", tiny_oryx("mamba2"), modes_of(mixed), 200);
  write_case(root / "gdn_all_linear", tiny_oryx("gdn"), modes_of({"000000000", "000000000"}), 300);
  write_case(root / "mamba2_all_attention", tiny_oryx("mamba2"),
             modes_of({"111111111", "111111111"}), 400);
  ModelConfig two_heads = tiny_oryx("mamba2");  // head_dim 8: P = N = 8, 2 heads
  two_heads.head_dim = 8;
  write_case(root / "mamba2_hd8_alternating", two_heads, modes_of({"010101010", "101010101"}), 500);
  std::string cmd = std::string(AMOR_PYTHON) + " \"" + (kRepo / "tests" / "oryx_check.py").string() + "\" \"" +
                    root.string() + "\"";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  if (rc == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace amor::model
