#include "runner/app/fit_router.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/json/json.h"
#include "kernels/core/error.h"
#include "models/amor/amor_model.h"
#include "models/amor/entropy_router.h"
#include "models/io/model_weights.h"
#include "models/io/safetensors.h"
#include "runner/app/version.h"
#include "runner/app/subcommand.h"
#include "runner/app/text_file.h"
#include "runner/config/canonical.h"
#include "runner/train/checkpoints.h"
#include "runner/train/data_setup.h"

namespace amor {
namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: amor-run fit-router RUN_DIR [--tokens N] [--steps S] [--width W] [--batch B] [--lr LR]\n"
    "                           [--holdout F] [--seed S] [--data RUN_CONFIG.json]\n"
    "  Fits the entropy router of an AMOR run (per block an MLP predicting its gate's entropy from\n"
    "  the block's normed input) and writes RUN_DIR/router.safetensors and RUN_DIR/router_fit.json;\n"
    "  evaluate with eval.router=RUN_DIR/router.safetensors.\n";

using Usage = UsageError;

struct Options {
  std::string run_dir, data_config;
  int64_t tokens = 32768, width = 512, seed = 0;
  double holdout = 0.1;
  model::RouterFitOptions fit;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  std::vector<std::string> pos;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Usage(a + " needs a value");
      return args[++i];
    };
    auto integer = [&](int64_t lo) {
      const std::string v = value();
      const std::optional<int64_t> x = whole_integer(v);
      if (!x || *x < lo) throw Usage(fmt::format("{} '{}': expected a whole number >= {}", a, v, lo));
      return *x;
    };
    auto real = [&](double lo, double hi) {
      const std::string v = value();
      const std::optional<double> x = whole_number(v);
      if (!x || !(*x > lo && *x < hi))
        throw Usage(fmt::format("{} '{}': expected a number in ({}, {})", a, v, lo, hi));
      return *x;
    };
    if (a == "--tokens") o.tokens = integer(2);
    else if (a == "--steps") o.fit.steps = integer(0);
    else if (a == "--width") o.width = integer(1);
    else if (a == "--batch") o.fit.batch = integer(1);
    else if (a == "--lr") o.fit.lr = real(0, 1e9);
    else if (a == "--holdout") o.holdout = real(0, 1);
    else if (a == "--seed") o.seed = integer(0);
    else if (a == "--data") o.data_config = value();
    else if (a == "--help" || a == "-h") throw Usage("");
    else if (a.rfind("--", 0) == 0) throw Usage("unknown option '" + a + "'");
    else pos.push_back(a);
  }
  if (pos.size() != 1) throw Usage("give one RUN_DIR");
  o.run_dir = pos[0];
  o.fit.seed = static_cast<uint64_t>(o.seed);
  return o;
}

// The gates' EMA state: the newest checkpoint's, else the weights file's (load_model_weights
// restored it), else the config's m_init / s_init.
std::string restore_gates(model::LanguageModel& m, const fs::path& run_dir, bool weights_had_gates) {
  const fs::path ckdir = run_dir / "checkpoints";
  if (fs::is_directory(ckdir))
    if (auto latest = Checkpoints(ckdir, 1).latest()) {
      const json::Value meta = json::parse_file((*latest / "fsdp.json").string());
      std::map<std::string, std::string> extra;
      if (const json::Value* ex = meta.find("extra"))
        for (const auto& [k, v] : ex->as_object("fsdp.json extra"))
          if (v.is_string()) extra[k] = v.as_string();
      m.restore_checkpoint_state(extra, /*required=*/false);
      return "the gates' thresholds from " + latest->string();
    }
  if (weights_had_gates) return "the gates' thresholds from model.safetensors";
  return "warning: no checkpoint under " + ckdir.string() +
         ": the gates' thresholds are model.amor.m_init / s_init";
}

struct BlockData {
  std::vector<double> x, h;     // [n, d], [n]
  std::vector<uint8_t> gate;    // the LM-head gate's decision
};

json::Value run_fit(const Options& o, std::ostream& out) {
  const fs::path run_dir(o.run_dir);
  config::RunConfig cfg =
      config::load_run_config_json(read_text_file((run_dir / "config.json").string()), (run_dir / "config.json").string());
  AMOR_CHECK(cfg.model.kind == "amor", "fit-router: {} is a model.kind '{}' run; the router replaces AMOR's gates",
             o.run_dir, cfg.model.kind);
  if (!o.data_config.empty())
    cfg.data = config::load_run_config_json(read_text_file(o.data_config), o.data_config).data;

  auto built = model::build_model(cfg.model, DType::F32);
  auto* m = dynamic_cast<model::AmorModel*>(built.get());
  AMOR_CHECK(m, "fit-router: the model of {} is not an AMOR model", o.run_dir);
  const auto meta = model::load_model_weights((run_dir / "model.safetensors").string(), *m);
  out << restore_gates(*m, run_dir, meta.count("amor_gates") > 0) << "\n";

  const int64_t K = m->num_blocks(), d = cfg.model.d_model;
  RunData data = make_run_data(cfg, 0, 1);
  std::vector<model::Batch> batches;
  int64_t seen = 0;
  while (seen < o.tokens) {
    batches.push_back(data.train->next());
    seen += batches.back().tokens.numel();
  }
  const auto n_batches = static_cast<int64_t>(batches.size());
  const int64_t n_hold = std::max<int64_t>(1, static_cast<int64_t>(std::llround(o.holdout * static_cast<double>(n_batches))));
  AMOR_CHECK(n_batches >= 2 && n_hold < n_batches,
             "fit-router: {} token(s) make {} batch(es) of {} sequences of {}: too few to hold {} out (raise --tokens)",
             o.tokens, n_batches, cfg.train.micro_batch, cfg.data.seq_len, n_hold);
  std::vector<BlockData> fit(static_cast<size_t>(K)), held(static_cast<size_t>(K));
  std::vector<double> tau;
  double loss_lm = 0;
  int64_t n_loss = 0;
  for (int64_t i = 0; i < n_batches; ++i) {
    std::vector<BlockData>& dst = i < n_batches - n_hold ? fit : held;
    m->set_block_observer([&](int64_t k, const Tensor& hn, const Tensor& H) {
      auto xs = hn.to(Device::CPU).to(DType::F64).to_vector<double>();
      auto hs = H.to(Device::CPU).to(DType::F64).to_vector<double>();
      dst[static_cast<size_t>(k)].x.insert(dst[static_cast<size_t>(k)].x.end(), xs.begin(), xs.end());
      dst[static_cast<size_t>(k)].h.insert(dst[static_cast<size_t>(k)].h.end(), hs.begin(), hs.end());
    });
    model::StepOutput s = m->forward(batches[static_cast<size_t>(i)], /*training=*/false);
    for (int64_t k = 0; k < K; ++k) {
      auto g = s.gates[static_cast<size_t>(k)].to(Device::CPU).to_vector<uint8_t>();
      dst[static_cast<size_t>(k)].gate.insert(dst[static_cast<size_t>(k)].gate.end(), g.begin(), g.end());
    }
    tau = s.tau;
    if (i >= n_batches - n_hold) {
      loss_lm += s.loss_sum;
      n_loss += s.n_valid;
    }
  }
  m->set_block_observer(nullptr);

  auto router = std::make_shared<model::EntropyRouter>();
  json::Array blocks;
  out << fmt::format("{:>5} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "block", "tau", "fit_mse",
                     "held_mse", "agreement", "lm_fire", "rt_fire", "chance");
  for (int64_t k = 0; k < K; ++k) {
    const BlockData& f = fit[static_cast<size_t>(k)];
    const BlockData& h = held[static_cast<size_t>(k)];
    const auto n = static_cast<int64_t>(f.h.size()), nh = static_cast<int64_t>(h.h.size());
    Tensor x = Tensor::from_vector<double>({n, d}, f.x), y = Tensor::from_vector<double>({n}, f.h);
    double mean = 0;
    for (double v : f.h) mean += v / static_cast<double>(n);
    model::RouterParams p = model::router_init(d, o.width, static_cast<uint64_t>(o.seed) * 131 + static_cast<uint64_t>(k), mean);
    model::RouterFitOptions fo = o.fit;
    fo.seed = o.fit.seed + static_cast<uint64_t>(k);
    const double fit_mse = model::router_fit(p, x, y, fo);
    Tensor xh = Tensor::from_vector<double>({nh, d}, h.x), yh = Tensor::from_vector<double>({nh}, h.h);
    const double held_mse = model::router_mse(p, xh, yh);
    Tensor pred = model::router_forward(p, xh);
    int64_t agree = 0, lm_fire = 0, rt_fire = 0;
    for (int64_t i = 0; i < nh; ++i) {
      const bool r = pred.data<double>()[i] > tau[static_cast<size_t>(k)];
      const bool l = h.gate[static_cast<size_t>(i)] != 0;
      agree += r == l;
      lm_fire += l;
      rt_fire += r;
    }
    const double agreement = static_cast<double>(agree) / static_cast<double>(nh);
    const double lm_rate = static_cast<double>(lm_fire) / static_cast<double>(nh);
    const double rt_rate = static_cast<double>(rt_fire) / static_cast<double>(nh);
    const double chance = std::max(lm_rate, 1 - lm_rate);
    out << fmt::format("{:>5} {:>8.4f} {:>10.3g} {:>10.3g} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f}\n", k,
                       tau[static_cast<size_t>(k)], fit_mse, held_mse, agreement, lm_rate, rt_rate, chance);
    blocks.emplace_back(json::Object{{"block", k},
                                     {"tau", tau[static_cast<size_t>(k)]},
                                     {"fit_tokens", n},
                                     {"heldout_tokens", nh},
                                     {"fit_mse", fit_mse},
                                     {"heldout_mse", held_mse},
                                     {"gate_agreement", agreement},
                                     {"lm_fire_rate", lm_rate},
                                     {"router_fire_rate", rt_rate},
                                     {"constant_gate_agreement", chance}});
    router->blocks.push_back(std::move(p));
  }

  // The score change: the held-out batches' mean loss with the router's gates.
  m->set_entropy_router(router);
  double loss_rt = 0;
  for (int64_t i = n_batches - n_hold; i < n_batches; ++i)
    loss_rt += m->forward(batches[static_cast<size_t>(i)], false).loss_sum;
  m->set_entropy_router(nullptr);
  const double mean_lm = loss_lm / static_cast<double>(std::max<int64_t>(n_loss, 1));
  const double mean_rt = loss_rt / static_cast<double>(std::max<int64_t>(n_loss, 1));
  out << fmt::format("held-out loss: LM-head gates {:.6f}, router gates {:.6f} (change {:+.6f} nats/token, {} tokens)\n",
                     mean_lm, mean_rt, mean_rt - mean_lm, n_loss);

  json::Value report(json::Object{{"format", "amor-run router fit"},
                                  {"amor_run_version", version()},
                                  {"run_dir", o.run_dir},
                                  {"tokens", seen},
                                  {"width", o.width},
                                  {"steps", o.fit.steps},
                                  {"batch", o.fit.batch},
                                  {"lr", o.fit.lr},
                                  {"seed", o.seed},
                                  {"holdout_batches", n_hold},
                                  {"data", o.data_config.empty() ? std::string("the run's training data") : o.data_config},
                                  {"blocks", blocks},
                                  {"heldout_loss_lm_gate", mean_lm},
                                  {"heldout_loss_router_gate", mean_rt},
                                  {"heldout_loss_change", mean_rt - mean_lm}});
  router->metadata["fit"] = report.dump();
  router->metadata["amor_run_version"] = version();
  const std::string rpath = (run_dir / "router.safetensors").string();
  model::save_entropy_router(rpath, *router);
  write_file_atomic((run_dir / "router_fit.json").string(), report.dump() + "\n");
  out << "wrote " << rpath << " and " << (run_dir / "router_fit.json").string() << "\n";
  return report;
}

}  // namespace

bool is_fit_router(int argc, const char* const* argv) {
  return argc > 1 && std::strcmp(argv[1], "fit-router") == 0;
}

int fit_router_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return run_subcommand("fit-router", kUsage, out, err, [&] {
    run_fit(parse(args), out);
    return 0;
  });
}

}  // namespace amor
