// `amor-run convert-weights` (runner/app/convert_weights.h): the AMOR authors' state dicts in,
// ours out, and back.
//   - AuthorsModelGivesOurOutputs: tests/authors_amor.py builds AMOR in the authors' module
//     naming (plain PyTorch, f64) and writes its state dict and outputs; converted and loaded
//     here (gates' EMA from the metadata), amor-run's eval forward gives the same per-token loss,
//     entropy, gate entropies (1e-10) and gates (identical). Both backbones, classic and h, K 1, 3.
//   - Round trips ours -> authors -> ours and authors -> ours -> authors are bitwise (f32, f64;
//     bf16 stays bf16); --model may be a sweep file (presets resolved) or a run's config.json.
//   - A missing, extra or mis-shaped tensor is an error naming it; a pickle names the script,
//     scripts/torch_to_safetensors.py, which gives the state dict's safetensors bit for bit.
#include "runner/app/convert_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/amor/amor_model.h"
#include "models/core/config_json.h"
#include "models/io/authors_layout.h"
#include "models/io/model_weights.h"
#include "models/io/safetensors.h"
#include "models/lm/language_model.h"

namespace amor {
namespace {

namespace fs = std::filesystem;
using model::ModelConfig;

ModelConfig tiny(const std::string& backbone, const std::string& residual, int64_t blocks) {
  ModelConfig c;
  c.kind = "amor";
  c.vocab = 17;
  c.d_model = 16;
  c.head_dim = 8;
  c.n_layers = 2;
  c.d_ff = 24;
  c.vocab_chunk = 6;
  c.mamba2.head_dim = 8;
  c.mamba2.d_state = 8;
  c.mamba2.chunk = 4;
  c.gdn.head_dim = 4;
  c.gdn.qk_ratio = 0.5;
  c.gdn.chunk = 4;
  c.amor.backbone = backbone;
  c.amor.residual_mode = residual;
  c.amor.blocks = blocks;
  c.mixer_norm_eps = 0.05;  // every norm location its own epsilon: a mixed-up norm shows
  c.mlp_norm_eps = 0.2;
  c.norm_f_eps = 0.01;
  c.amor.norm_eps = 0.3;
  return c;
}

struct Dir {
  fs::path path = fs::temp_directory_path() / ("convert_weights." + std::to_string(getpid()));
  Dir() { fs::remove_all(path), fs::create_directories(path); }
  ~Dir() {
    if (!::testing::Test::HasFailure()) fs::remove_all(path);
  }
};

// A run config holding only the model section (defaults fill the rest).
std::string write_run_config(const fs::path& p, const ModelConfig& c) {
  std::ofstream(p) << "{\"model\": " << model::to_json(c).dump() << "}\n";
  return p.string();
}

int convert(const std::vector<std::string>& args, std::string* err_text = nullptr) {
  std::ostringstream out, err;
  int rc = convert_weights_main(args, out, err);
  if (err_text) *err_text = err.str();
  else if (rc != 0) ADD_FAILURE() << err.str();
  return rc;
}

std::string bytes(const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.nbytes()); }

void expect_same_files(const std::string& a, const std::string& b) {
  SafetensorsFile fa = load_safetensors(a), fb = load_safetensors(b);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) {
    const Tensor* u = fb.find(name);
    ASSERT_TRUE(u) << name;
    EXPECT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(t.dtype(), u->dtype()) << name;
    EXPECT_TRUE(bytes(t) == bytes(*u)) << name << " differs";
  }
}

std::vector<ModelConfig> oracle_cases() {
  std::vector<ModelConfig> out;
  for (const char* backbone : {"gdn", "mamba2"})
    for (const char* residual : {"classic", "h"})
      for (int64_t blocks : {1, 3}) out.push_back(tiny(backbone, residual, blocks));
  return out;
}

std::string case_name(const ModelConfig& c) {
  return fmt::format("{}_{}_k{}", c.amor.backbone, c.amor.residual_mode, c.amor.blocks);
}

TEST(ConvertWeights, AuthorsModelGivesOurOutputs) {
  Dir dir;
  for (const ModelConfig& cfg : oracle_cases()) {
    fs::create_directories(dir.path / case_name(cfg));
    std::ofstream(dir.path / case_name(cfg) / "model.json") << model::to_json(cfg).dump() << "\n";
  }
  const std::string py = std::string(AMOR_PYTHON) + " '" + AMOR_SOURCE_DIR + "/tests/authors_amor.py' ";
  ASSERT_EQ(std::system((py + "make '" + dir.path.string() + "'").c_str()), 0);
  {  // a pickled checkpoint ({"model": state_dict, ...}) through scripts/torch_to_safetensors.py
    const fs::path d = dir.path / case_name(oracle_cases()[0]);
    ASSERT_EQ(std::system((std::string(AMOR_PYTHON) + " '" + AMOR_SOURCE_DIR + "/scripts/torch_to_safetensors.py' '" +
                           (d / "authors.pt").string() + "' '" + (d / "from_pt.safetensors").string() + "' > /dev/null")
                              .c_str()), 0);
    expect_same_files((d / "authors.safetensors").string(), (d / "from_pt.safetensors").string());
  }
  for (const ModelConfig& cfg : oracle_cases()) {
    SCOPED_TRACE(case_name(cfg));
    const fs::path d = dir.path / case_name(cfg);
    const std::string run_cfg = write_run_config(d / "run.json", cfg);
    ASSERT_EQ(convert({"--from", "authors", "--model", run_cfg, (d / "authors.safetensors").string(),
                       (d / "converted.safetensors").string()}), 0);
    auto m = model::build_model(cfg, DType::F64);
    model::load_model_weights((d / "converted.safetensors").string(), *m);  // gates from the metadata
    SafetensorsFile batch = load_safetensors((d / "batch.safetensors").string());
    model::StepOutput o = m->forward({*batch.find("tokens"), *batch.find("targets")}, /*training=*/false);
    std::vector<std::pair<std::string, Tensor>> ours = {{"token_loss", o.token_loss}, {"entropy", o.entropy}};
    for (size_t i = 0; i < o.gates.size(); ++i) {
      ours.emplace_back("gate." + std::to_string(i), o.gates[i]);
      ours.emplace_back("gate_entropy." + std::to_string(i), o.gate_entropy[i]);
    }
    save_safetensors((d / "ours.safetensors").string(), ours);
    // And back: the authors' file again, bit for bit (gate buffers included).
    ASSERT_EQ(convert({"--to", "authors", (d / "converted.safetensors").string(), (d / "back.safetensors").string()}), 0);
    expect_same_files((d / "authors.safetensors").string(), (d / "back.safetensors").string());
  }
  EXPECT_EQ(std::system((py + "compare '" + dir.path.string() + "'").c_str()), 0);
}

TEST(ConvertWeights, OursToAuthorsToOursIsBitwise) {
  Dir dir;
  for (DType dt : {DType::F32, DType::F64}) {
    for (const char* backbone : {"gdn", "mamba2"}) {
      ModelConfig cfg = tiny(backbone, "classic", 3);
      auto m = model::build_model(cfg, dt);
      m->params().initialize(7);
      auto& amor_m = static_cast<model::AmorModel&>(*m);
      amor_m.set_gate_state({{0.25, 0.125}, {0.5, 0.0625}, {0.75, 0.25}});  // exact in f32 too
      const std::string a = (dir.path / "a.safetensors").string(), b = (dir.path / "b.safetensors").string(),
                        c = (dir.path / "c.safetensors").string();
      model::save_model_weights(a, m->params(), cfg, "test");
      // save_model_weights writes no gates: they come from --gates (a checkpoint's amor_gates).
      const std::string gates = model::gate_state_to_json(amor_m.gate_state());
      std::string err;
      EXPECT_EQ(convert({"--to", "authors", a, b}, &err), 1);
      EXPECT_NE(err.find("--gates"), std::string::npos) << err;
      ASSERT_EQ(convert({"--to", "authors", "--gates", gates, a, b}), 0);
      const std::string run_cfg = write_run_config(dir.path / "run.json", cfg);
      ASSERT_EQ(convert({"--from", "authors", "--model", run_cfg, b, c}), 0);
      SafetensorsFile fa = load_safetensors(a), fc = load_safetensors(c);
      ASSERT_EQ(fa.tensors.size(), fc.tensors.size());
      for (size_t i = 0; i < fa.tensors.size(); ++i) {
        EXPECT_EQ(fa.tensors[i].first, fc.tensors[i].first);  // ParamStore order
        EXPECT_EQ(fa.tensors[i].second.dtype(), fc.tensors[i].second.dtype());
        EXPECT_EQ(fa.tensors[i].second.shape(), fc.tensors[i].second.shape());
        EXPECT_TRUE(bytes(fa.tensors[i].second) == bytes(fc.tensors[i].second)) << fa.tensors[i].first;
      }
      EXPECT_EQ(fc.metadata.at("amor_gates"), gates);
      EXPECT_EQ(fc.metadata.at("model_config"), fa.metadata.at("model_config"));
      // The authors' file has their names: a conv is [C,1,K], the head is listed too.
      SafetensorsFile fb = load_safetensors(b);
      ASSERT_TRUE(fb.find("lm_head.weight"));
      ASSERT_TRUE(fb.find("amor_blocks.2.gate.running_std"));
      EXPECT_EQ(fb.find("amor_blocks.2.gate.running_std")->item(0), 0.25);
      EXPECT_EQ(fb.find(std::string(backbone) == "gdn" ? "layers.0.gdn.q_conv1d.weight" : "ssd_layers.0.mixer.conv1d.weight")
                    ->dim(), 3);
    }
  }
}

// A bf16 checkpoint (model.to(torch.bfloat16): buffers bf16 too) stays bf16; the gates are read
// from bf16 scalars and written back as f32 (torch's default for a buffer: loads into either).
TEST(ConvertWeights, Bf16StaysBf16) {
  Dir dir;
  ModelConfig cfg = tiny("gdn", "classic", 1);
  auto m = model::build_model(cfg, DType::F32);
  m->params().initialize(9);
  const std::string ours = (dir.path / "ours.safetensors").string(), theirs = (dir.path / "theirs.safetensors").string(),
                    bf = (dir.path / "bf16.safetensors").string(), conv = (dir.path / "conv.safetensors").string(),
                    back = (dir.path / "back.safetensors").string();
  model::save_model_weights(ours, m->params(), cfg, "test");
  ASSERT_EQ(convert({"--to", "authors", "--gates", "[{\"m\":0.375,\"s\":0.125}]", ours, theirs}), 0);
  std::vector<std::pair<std::string, Tensor>> t;
  for (auto& [n, v] : load_safetensors(theirs).tensors) t.emplace_back(n, v.to(DType::BF16));
  save_safetensors(bf, t);
  const std::string run_cfg = write_run_config(dir.path / "run.json", cfg);
  ASSERT_EQ(convert({"--from", "authors", "--model", run_cfg, bf, conv}), 0);
  SafetensorsFile c = load_safetensors(conv);
  for (auto& [n, v] : c.tensors) EXPECT_EQ(v.dtype(), DType::BF16) << n;
  EXPECT_EQ(model::gate_state_from_json(c.metadata.at("amor_gates"))[0].m, 0.375);
  ASSERT_EQ(convert({"--to", "authors", conv, back}), 0);
  SafetensorsFile a = load_safetensors(bf), b = load_safetensors(back);
  for (auto& [n, v] : a.tensors) {
    const Tensor* u = b.find(n);
    ASSERT_TRUE(u) << n;
    if (n.find(".gate.") != std::string::npos) {
      EXPECT_EQ(u->dtype(), DType::F32) << n;
      EXPECT_EQ(u->item(0), v.item(0)) << n;
    } else {
      EXPECT_TRUE(bytes(v) == bytes(*u)) << n;
    }
  }
}

// --model as a sweep file (what evaluates the checkpoint): runs over seeds share the model; a
// sweep over two models is refused.
TEST(ConvertWeights, ModelFromSweepFile) {
  Dir dir;
  ModelConfig cfg = tiny("mamba2", "h", 1);
  auto m = model::build_model(cfg, DType::F32);
  m->params().initialize(5);
  const std::string ours = (dir.path / "ours.safetensors").string(), theirs = (dir.path / "theirs.safetensors").string(),
                    back = (dir.path / "back.safetensors").string(), sweep = (dir.path / "eval.yaml").string();
  model::save_model_weights(ours, m->params(), cfg, "test");
  ASSERT_EQ(convert({"--to", "authors", "--gates", "[{\"m\":0.3,\"s\":0.1}]", ours, theirs}), 0);
  std::ofstream(sweep) << "name: authors-eval\nbase:\n  model: " << model::to_json(cfg).dump()
                       << "\nsweep:\n  seeds: [1, 2]\n";
  ASSERT_EQ(convert({"--from", "authors", "--model", sweep, theirs, back}), 0);
  EXPECT_EQ(load_safetensors(back).metadata.at("model_config"), model::to_json(cfg).dump());
  std::ofstream(sweep) << "name: authors-eval\nbase:\n  model: " << model::to_json(cfg).dump()
                       << "\nsweep:\n  grid: {model.amor.blocks: [1, 3]}\n";
  std::string err;
  EXPECT_EQ(convert({"--from", "authors", "--model", sweep, theirs, back}, &err), 1);
  EXPECT_NE(err.find("have different models"), std::string::npos) << err;
}

TEST(ConvertWeights, ProblemsAreNamed) {
  Dir dir;
  ModelConfig cfg = tiny("gdn", "h", 3);
  auto m = model::build_model(cfg, DType::F32);
  m->params().initialize(3);
  const std::string ours = (dir.path / "ours.safetensors").string(), theirs = (dir.path / "theirs.safetensors").string(),
                    bad = (dir.path / "bad.safetensors").string(), out = (dir.path / "out.safetensors").string();
  model::save_model_weights(ours, m->params(), cfg, "test");
  ASSERT_EQ(convert({"--to", "authors", "--gates", "[{\"m\":0.3,\"s\":0.1},{\"m\":0.3,\"s\":0.1},{\"m\":0.3,\"s\":0.1}]",
                     ours, theirs}), 0);
  const std::string run_cfg = write_run_config(dir.path / "run.json", cfg);
  SafetensorsFile f = load_safetensors(theirs);
  std::vector<std::pair<std::string, Tensor>> t;
  for (auto& [n, v] : f.tensors) {
    if (n == "layers.1.gdn.a_proj.weight") continue;                          // missing
    if (n == "amor_pre_norms.2.weight") t.emplace_back(n, Tensor::zeros({5}, DType::F32));  // mis-shaped
    else if (n == "amor_blocks.0.gate.running_std") continue;                 // a gate buffer missing
    else t.emplace_back(n, v);
  }
  t.emplace_back("amor_blocks.0.rope.cos_cached", Tensor::zeros({4, 8}, DType::F32));  // extra
  save_safetensors(bad, t);
  std::string err;
  EXPECT_EQ(convert({"--from", "authors", "--model", run_cfg, bad, out}, &err), 1);
  for (const char* s : {"'layers.1.gdn.a_proj.weight' (amor-run's 'layers.1.mixer.a_proj.weight') is missing",
                        "'amor_pre_norms.2.weight' has shape [5] in the file, expected [16]",
                        "'amor_blocks.0.gate.running_std' (block 0's gate EMA) is missing",
                        "unexpected tensor 'amor_blocks.0.rope.cos_cached' [4,8]", "4 problems"})
    EXPECT_NE(err.find(s), std::string::npos) << s << "\n" << err;
  EXPECT_FALSE(fs::exists(out));

  // An untied head, and a tensor of another dtype.
  t.clear();
  for (auto& [n, v] : f.tensors)
    if (n == "lm_head.weight") t.emplace_back(n, v.clone()), t.back().second.set_item(0, 9);
    else if (n == "final_norm.weight") t.emplace_back(n, v.to(DType::F64));
    else t.emplace_back(n, v);
  save_safetensors(bad, t);
  EXPECT_EQ(convert({"--from", "authors", "--model", run_cfg, bad, out}, &err), 1);
  EXPECT_NE(err.find("'lm_head.weight' differs from 'embed.weight'"), std::string::npos) << err;
  EXPECT_NE(err.find("'final_norm.weight' is f64 while the others are f32"), std::string::npos) << err;

  // Ours with an extra tensor and a wrong shape, the other way.
  t.clear();
  SafetensorsFile fo = load_safetensors(ours);
  for (auto& [n, v] : fo.tensors) t.emplace_back(n, n == "amor.1.alpha" ? Tensor::zeros({3}, DType::F32) : v);
  t.emplace_back("amor.0.gate.m", Tensor::zeros({}, DType::F32));
  save_safetensors(bad, t, fo.metadata);
  EXPECT_EQ(convert({"--to", "authors", "--gates", "[{\"m\":0.3,\"s\":0.1},{\"m\":0.3,\"s\":0.1},{\"m\":0.3,\"s\":0.1}]",
                     bad, out}, &err), 1);
  EXPECT_NE(err.find("'amor.1.alpha' has shape [3] in the file, expected [16]"), std::string::npos) << err;
  EXPECT_NE(err.find("unexpected tensor 'amor.0.gate.m'"), std::string::npos) << err;

  // Pickles are PyTorch's to read.
  EXPECT_EQ(convert({"--from", "authors", "--model", run_cfg, (dir.path / "model.pt").string(), out}, &err), 1);
  EXPECT_NE(err.find("scripts/torch_to_safetensors.py"), std::string::npos) << err;
  EXPECT_EQ(convert({"--from", "authors", bad}, &err), 2);
}

}  // namespace
}  // namespace amor
