// amor-run fit-router on a run folder made here (config.json + model.safetensors of a tiny AMOR
// model on MQAR data): it writes router.safetensors and router_fit.json with a row per block and
// the held-out loss change, the router loads into the model (what eval.router does), and the
// usage and run problems are reported with exit codes 2 and 1. eval.router is left out of the
// canonical config at its default (run hashes unchanged).
#include "runner/app/fit_router.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "data/json/json.h"
#include "models/amor/amor_model.h"
#include "models/amor/amor_test_support.h"
#include "models/io/model_weights.h"
#include "models/io/safetensors.h"
#include "runner/app/version.h"
#include "runner/config/canonical.h"
#include "tests/common/tiny_models.h"

namespace amor {
namespace {

namespace fs = std::filesystem;

config::RunConfig tiny_run(const std::string& kind) {
  config::RunConfig cfg;
  static_cast<model::ModelConfig&>(cfg.model) = testing::tiny_model(kind, /*d_model=*/16, /*n_layers=*/2, /*vocab=*/64);
  cfg.model.amor.backbone = "gdn";
  cfg.model.amor.blocks = 3;
  cfg.data.source = "mqar";
  cfg.data.seq_len = 32;
  cfg.data.mqar.num_kv_pairs = 4;
  cfg.data.mqar.num_train = 64;
  cfg.train.micro_batch = 4;
  return cfg;
}

fs::path make_run(const std::string& name, const config::RunConfig& cfg) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "config.json").string(), config::canonical_json(cfg));
  auto m = model::build_model(cfg.model, DType::F32);
  m->params().initialize(3);
  model::testing_amor::perturb_amor_weights(m->params(), 4);
  model::save_model_weights((dir / "model.safetensors").string(), m->params(), cfg.model, version());
  return dir;
}

TEST(FitRouter, WritesTheRouterAndItsReport) {
  const config::RunConfig cfg = tiny_run("amor");
  const fs::path dir = make_run("fit_router_run", cfg);
  std::ostringstream out, err;
  const int rc = fit_router_main({dir.string(), "--tokens", "1280", "--steps", "200", "--width", "32",
                                  "--batch", "64", "--holdout", "0.2"},
                                 out, err);
  ASSERT_EQ(rc, 0) << err.str();
  std::printf("%s", out.str().c_str());
  EXPECT_NE(out.str().find("warning: no checkpoint"), std::string::npos);  // thresholds: m_init / s_init
  EXPECT_NE(out.str().find("held-out loss: LM-head gates"), std::string::npos);

  const json::Value report = json::parse_file((dir / "router_fit.json").string());
  EXPECT_EQ(report.at("format").as_string(), "amor-run router fit");
  EXPECT_EQ(report.at("width").as_int(), 32);
  EXPECT_EQ(report.at("tokens").as_int(), 1280);  // 10 batches of 4 x 32
  EXPECT_EQ(report.at("holdout_batches").as_int(), 2);
  const json::Array& blocks = report.at("blocks").as_array();
  ASSERT_EQ(blocks.size(), 3u);
  for (const json::Value& b : blocks) {
    EXPECT_EQ(b.at("fit_tokens").as_int(), 1024);
    EXPECT_EQ(b.at("heldout_tokens").as_int(), 256);
    const double a = b.at("gate_agreement").as_double();
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, 1.0);
    EXPECT_GE(b.at("fit_mse").as_double(), 0.0);
  }
  EXPECT_TRUE(std::isfinite(report.at("heldout_loss_change").as_double()));

  // The router file: one MLP per block at the model's width; eval.router loads it into the model.
  const model::EntropyRouter r = model::load_entropy_router((dir / "router.safetensors").string());
  EXPECT_EQ(r.blocks.size(), 3u);
  EXPECT_EQ(r.d(), 16);
  EXPECT_EQ(r.width(), 32);
  EXPECT_EQ(r.metadata.at("fit"), report.dump());
  auto m = model::build_model(cfg.model, DType::F32);
  EXPECT_NO_THROW(m->use_entropy_router((dir / "router.safetensors").string()));
  auto t = model::build_model(testing::tiny_model("transformer", 16, 2, 64), DType::F32);
  EXPECT_THROW(t->use_entropy_router((dir / "router.safetensors").string()), Error);
  fs::remove_all(dir);
}

TEST(FitRouter, ProblemsAreReported) {
  std::ostringstream out, err;
  EXPECT_EQ(fit_router_main({}, out, err), 2);
  EXPECT_EQ(fit_router_main({"a", "--steps", "x"}, out, err), 2);
  EXPECT_EQ(fit_router_main({"a", "--holdout", "1.5"}, out, err), 2);
  EXPECT_EQ(fit_router_main({"--help"}, out, err), 0);
  EXPECT_NE(out.str().find("usage: amor-run fit-router"), std::string::npos);
  err.str("");
  EXPECT_EQ(fit_router_main({(fs::path(::testing::TempDir()) / "no_such_run").string()}, out, err), 1);
  EXPECT_NE(err.str().find("config.json"), std::string::npos) << err.str();
  const fs::path dir = make_run("fit_router_transformer", tiny_run("transformer"));
  err.str("");
  EXPECT_EQ(fit_router_main({dir.string()}, out, err), 1);
  EXPECT_NE(err.str().find("model.kind 'transformer'"), std::string::npos) << err.str();
  fs::remove_all(dir);
}

TEST(FitRouter, EvalRouterKeyKeepsRunHashesAtItsDefault) {
  config::RunConfig cfg;
  EXPECT_EQ(config::canonical_json(cfg).find("router"), std::string::npos);
  cfg.eval.router = "results/x/run/router.safetensors";
  EXPECT_NE(config::canonical_json(cfg).find("\"router\""), std::string::npos);
  EXPECT_EQ(config::load_run_config_json(config::canonical_json(cfg)).eval.router, cfg.eval.router);
}

}  // namespace
}  // namespace amor
