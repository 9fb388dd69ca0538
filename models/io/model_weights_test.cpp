// Model weights files: round trip of every kind (names, shapes, values bitwise, metadata with the
// config JSON and version), dtype conversion both ways, the errors for missing / unexpected /
// wrong-shape / non-float tensors and a missing file (each naming the tensor and both shapes, the
// model left unchanged), and models/README.md documenting every parameter name of every kind.
#include "models/io/model_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "models/core/config_json.h"
#include "models/io/safetensors.h"
#include "models/presets/test_models.h"
#include "tests/common/gradcheck.h"

namespace amor::model {
namespace {

namespace fs = std::filesystem;
using testing_models::build;
using testing_models::kinds_and_variants;
using testing_models::tiny;

class ModelWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("amor_model_weights_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The error of loading the file into a model of cfg; checks the model was left unchanged.
  std::string load_error(const std::string& file, const ModelConfig& cfg) {
    auto m = build(cfg, DType::F64);
    m->params().initialize(5);
    std::vector<Tensor> before;
    for (auto& p : m->params().params()) before.push_back(p->value.clone());
    try {
      load_model_weights(file, m->params());
    } catch (const Error& e) {
      for (size_t i = 0; i < before.size(); ++i)
        EXPECT_EQ(testing::max_abs_diff(m->params().params()[i]->value, before[i]), 0.0)
            << m->params().params()[i]->name << " changed by a failed load";
      return e.what();
    }
    ADD_FAILURE() << "loading " << file << " did not fail";
    return "";
  }

  fs::path dir_;
};

TEST_F(ModelWeights, RoundTripOfEveryKind) {
  for (auto& [label, cfg] : kinds_and_variants()) {
    auto a = build(cfg, DType::F64);
    a->params().initialize(1);
    const std::string file = path("w.safetensors");
    save_model_weights(file, a->params(), cfg, "9.8.7");
    auto b = build(cfg, DType::F64);
    b->params().initialize(2);
    auto meta = load_model_weights(file, b->params());
    ASSERT_EQ(a->params().params().size(), b->params().params().size()) << label;
    for (size_t i = 0; i < a->params().params().size(); ++i) {
      const Param& pa = *a->params().params()[i];
      const Param& pb = *b->params().params()[i];
      EXPECT_EQ(testing::max_abs_diff(pa.value, pb.value), 0.0) << label << " " << pa.name;
    }
    EXPECT_EQ(meta["format"], "amor-run model weights");
    EXPECT_EQ(meta["model_config"], to_json(cfg).dump()) << label;
    EXPECT_EQ(meta["amor_run_version"], "9.8.7");
    EXPECT_EQ(meta["parameters"], std::to_string(a->params().numel()));
    // The file holds exactly the store's tensors, in its order and dtype.
    SafetensorsFile f = load_safetensors(file);
    ASSERT_EQ(f.tensors.size(), a->params().params().size());
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      EXPECT_EQ(f.tensors[i].first, a->params().params()[i]->name);
      EXPECT_EQ(f.tensors[i].second.dtype(), DType::F64);
    }
  }
}

TEST_F(ModelWeights, DtypesAreConverted) {
  ModelConfig cfg = tiny("gdn");
  auto f64 = build(cfg, DType::F64);
  f64->params().initialize(3);
  save_model_weights(path("f64.safetensors"), f64->params(), cfg, "v");
  auto f32 = build(cfg, DType::F32);
  load_model_weights(path("f64.safetensors"), f32->params());
  for (size_t i = 0; i < f32->params().params().size(); ++i) {
    const Tensor& want = f64->params().params()[i]->value;
    const Tensor& got = f32->params().params()[i]->value;
    ASSERT_EQ(got.dtype(), DType::F32);
    for (int64_t j = 0; j < got.numel(); ++j)
      EXPECT_EQ(got.item(j), static_cast<double>(static_cast<float>(want.item(j))));
  }
  // f32 -> f64 is exact.
  save_model_weights(path("f32.safetensors"), f32->params(), cfg, "v");
  auto back = build(cfg, DType::F64);
  load_model_weights(path("f32.safetensors"), back->params());
  for (size_t i = 0; i < back->params().params().size(); ++i)
    EXPECT_EQ(testing::max_abs_diff(back->params().params()[i]->value,
                                    f32->params().params()[i]->value.to(DType::F64)),
              0.0);
}

TEST_F(ModelWeights, MissingTensorsAreNamedWithTheirShapes) {
  ModelConfig two = tiny("transformer"), three = tiny("transformer");
  three.n_layers = 3;
  auto m = build(two, DType::F64);
  save_model_weights(path("two.safetensors"), m->params(), two, "v");
  const std::string e = load_error(path("two.safetensors"), three);
  EXPECT_EQ(e.rfind(path("two.safetensors") + ": the weights do not fit this model (9 problems):", 0), 0u) << e;
  EXPECT_NE(e.find("tensor 'layers.2.norm1.weight' is missing (the model's shape is [16])"),
            std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'layers.2.mlp.down_proj.weight' is missing (the model's shape is [16,12])"),
            std::string::npos) << e;
}

TEST_F(ModelWeights, UnexpectedTensorsAreNamed) {
  ModelConfig three = tiny("mamba2"), two = tiny("mamba2");
  three.n_layers = 3;
  auto m = build(three, DType::F64);
  save_model_weights(path("three.safetensors"), m->params(), three, "v");
  const std::string e = load_error(path("three.safetensors"), two);
  EXPECT_NE(e.find("unexpected tensor 'layers.2.mixer.in_proj.weight' [80,16] (not a parameter of "
                   "this model)"),
            std::string::npos) << e;
  // Ten problems are listed, the rest counted.
  EXPECT_NE(e.find("\n  ... and 3 more"), std::string::npos) << e;
}

TEST_F(ModelWeights, WrongShapesNameBothShapes) {
  ModelConfig narrow = tiny("fused"), wide = tiny("fused");
  wide.d_ff = 20;
  auto m = build(narrow, DType::F64);
  save_model_weights(path("narrow.safetensors"), m->params(), narrow, "v");
  const std::string e = load_error(path("narrow.safetensors"), wide);
  EXPECT_NE(e.find("tensor 'layers.0.mlp.gate_proj.weight' has shape [12,16] in the file, the "
                   "model's is [20,16]"),
            std::string::npos) << e;
  EXPECT_NE(e.find("(6 problems)"), std::string::npos) << e;  // gate, up, down in both layers
}

TEST_F(ModelWeights, NonFloatTensorIsAnError) {
  ModelConfig cfg = tiny("transformer");
  auto m = build(cfg, DType::F64);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& p : m->params().params())
    tensors.emplace_back(p->name, p->name == "norm_f.weight" ? Tensor::zeros({16}, DType::I32)
                                                             : p->value);
  save_safetensors(path("int.safetensors"), tensors);
  const std::string e = load_error(path("int.safetensors"), cfg);
  EXPECT_NE(e.find("tensor 'norm_f.weight' is i32 in the file, expected a floating-point type"),
            std::string::npos) << e;
}

TEST_F(ModelWeights, MissingFileNamesThePath) {
  const std::string e = load_error(path("nope.safetensors"), tiny("gdn"));
  EXPECT_NE(e.find(path("nope.safetensors")), std::string::npos) << e;
}

TEST_F(ModelWeights, SaveIsAtomicAndLeavesNoTemporaryFile) {
  ModelConfig cfg = tiny("gdn");
  auto m = build(cfg, DType::F32);
  save_model_weights(path("w.safetensors"), m->params(), cfg, "v");
  save_model_weights(path("w.safetensors"), m->params(), cfg, "v");  // over an existing file
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "w.safetensors");
  }
  EXPECT_EQ(files, 1);
}

// A parameter name with its indices generalised: layers.3.x -> layers.{i}.x, amor.1.x -> amor.{k}.x
std::string name_pattern(const std::string& name) {
  static const std::regex layer(R"(^layers\.\d+\.)"), block(R"(^amor\.\d+\.)");
  return std::regex_replace(std::regex_replace(name, layer, "layers.{i}."), block, "amor.{k}.");
}

// The text of the README's section "### `kind`" (up to the next heading of level 2 or 3).
std::string section(const std::string& readme, const std::string& kind) {
  const std::string head = "### `" + kind + "`";
  size_t b = readme.find(head);
  if (b == std::string::npos) return "";
  size_t e = readme.find("\n#", b + head.size());
  return readme.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

TEST(ModelsReadme, DocumentsEveryParameterNameOfEveryKind) {
  std::ifstream f(fs::path(AMOR_SOURCE_DIR) / "models" / "README.md");
  ASSERT_TRUE(f.good()) << "models/README.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string readme = ss.str();
  for (auto& [label, cfg] : kinds_and_variants()) {
    const std::string text = section(readme, cfg.kind);
    ASSERT_FALSE(text.empty()) << "models/README.md has no section ### `" << cfg.kind << "`";
    auto m = build(cfg, DType::F32);
    std::set<std::string> patterns;
    for (auto& p : m->params().params()) patterns.insert(name_pattern(p->name));
    for (const std::string& pat : patterns) {
      EXPECT_NE(text.find("`" + pat + "`"), std::string::npos)
          << "models/README.md's section on " << cfg.kind << " does not document `" << pat
          << "` (" << label << ")";
    }
  }
}

}  // namespace
}  // namespace amor::model
