#include "runner/app/bench_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <mutex>
#include <thread>

#include "kernels/core/backend.h"
#include "kernels/core/error.h"
#include "models/amor/amor_model.h"
#include "models/infer/inference_session.h"
#include "models/lm/language_model.h"
#include "models/presets/param_count.h"
#include "runner/app/preset_resolve.h"
#include "runner/app/subcommand.h"
#include "runner/config/sweep.h"

namespace amor {
namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: amor-run bench-decode SWEEP.yaml [--batch 1,64] [--context 1024,4096,...] [--steps N]\n"
    "                             [--prefill-chunk N] [--fire-rate 0.22[,...]] [--device cuda|cpu]\n"
    "                             [--dtype bf16|f32] [--graphs] [--amor-form sparse,dense]\n"
    "                             [--gate lm-head,router]\n"
    "                             [--out FILE.csv] [key=value ...]\n"
    "  Prefill and greedy-decode speed of every run's model (random weights); see\n"
    "  runner/app/bench_decode.h.\n";

// The gates' calibration (calibrate_gates): 8 sequences, a 64-token random prompt, 128 decode
// steps, so 1024 entropies per block.
constexpr int64_t kCalibrationBatch = 8, kCalibrationPrompt = 64, kCalibrationSteps = 128;

using Usage = UsageError;

struct Options {
  std::string sweep;
  std::vector<std::string> overrides;
  std::vector<int64_t> batches{1, 64};
  std::vector<int64_t> contexts{1024, 4096, 16384, 32768, 65536, 131072, 262144, 458752};
  int64_t steps = 32, prefill_chunk = 4096;
  std::vector<double> fire_rates{0.22};
  std::string device, dtype, out = "bench_decode.csv";
  bool graphs = false;  // also time the decode steps replayed from CUDA graphs
  std::vector<std::string> amor_forms;  // AMOR's inference forms to time (empty: the model's own)
  std::vector<std::string> gates{"lm-head"};  // AMOR's gate inputs to time
};

// The router's width (the paper's, fit-router's default) and its output bias: the normalised
// entropies it stands in for lie in [0, 1].
constexpr int64_t kRouterWidth = 512;
constexpr double kRouterBias = 0.5;

int64_t parse_int(const std::string& flag, const std::string& s) {
  const std::optional<int64_t> v = whole_integer(s);
  if (!v || *v <= 0) throw Usage(fmt::format("{} '{}': expected a positive integer", flag, s));
  return *v;
}

double parse_rate(const std::string& s) {
  const std::optional<double> v = whole_number(s);
  if (!v || !(*v >= 0 && *v <= 1)) throw Usage(fmt::format("--fire-rate '{}': expected a number in [0, 1]", s));
  return *v;
}

std::vector<std::string> split_commas(const std::string& flag, const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string p;
  while (std::getline(ss, p, ',')) parts.push_back(p);
  if (parts.empty() || std::any_of(parts.begin(), parts.end(), [](const std::string& x) { return x.empty(); }))
    throw Usage(fmt::format("{} '{}': expected a comma-separated list", flag, s));
  return parts;
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw Usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--batch") {
      o.batches.clear();
      for (const auto& s : split_commas(a, value())) o.batches.push_back(parse_int(a, s));
    } else if (a == "--context") {
      o.contexts.clear();
      for (const auto& s : split_commas(a, value())) o.contexts.push_back(parse_int(a, s));
      std::sort(o.contexts.begin(), o.contexts.end());
    } else if (a == "--steps") {
      o.steps = parse_int(a, value());
    } else if (a == "--prefill-chunk") {
      o.prefill_chunk = parse_int(a, value());
    } else if (a == "--fire-rate") {
      o.fire_rates.clear();
      for (const auto& s : split_commas(a, value())) o.fire_rates.push_back(parse_rate(s));
    } else if (a == "--device") {
      o.device = value();
      if (o.device != "cuda" && o.device != "cpu") throw Usage("--device '" + o.device + "': use cuda or cpu");
    } else if (a == "--dtype") {
      o.dtype = value();
      if (o.dtype != "bf16" && o.dtype != "f32") throw Usage("--dtype '" + o.dtype + "': use bf16 or f32");
    } else if (a == "--graphs") {
      o.graphs = true;
    } else if (a == "--amor-form") {
      o.amor_forms = split_commas(a, value());
      for (const std::string& f : o.amor_forms)
        if (f != "sparse" && f != "dense") throw Usage("--amor-form '" + f + "': use sparse or dense");
    } else if (a == "--gate") {
      o.gates = split_commas(a, value());
      for (const std::string& g : o.gates)
        if (g != "lm-head" && g != "router") throw Usage("--gate '" + g + "': use lm-head or router");
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--help" || a == "-h") {
      throw Usage("");
    } else if (a.rfind("--", 0) == 0) {
      throw Usage("unknown option " + a);
    } else if (a.find('=') != std::string::npos) {
      o.overrides.push_back(a);
    } else if (o.sweep.empty()) {
      o.sweep = a;
    } else {
      throw Usage("one sweep file only ('" + o.sweep + "' and '" + a + "')");
    }
  }
  if (o.sweep.empty()) throw Usage("a sweep file is needed");
  if (o.device.empty()) o.device = cuda_available() ? "cuda" : "cpu";
  if (o.device == "cuda" && !cuda_available()) throw Error("--device cuda: no GPU here (or a build without CUDA)");
  if (o.dtype.empty()) o.dtype = o.device == "cuda" ? "bf16" : "f32";
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool is_oom(const std::exception& e) {
  return dynamic_cast<const OutOfMemory*>(&e) != nullptr || std::strstr(e.what(), "out of memory") != nullptr;
}

// Random tokens i32 [B,T] in [0, vocab) on dev.
Tensor random_tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed, Device dev) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(B * T));
  for (auto& x : ids) x = pick(rng);
  return Tensor::from_vector<int32_t>({B, T}, ids).to(dev);
}

// Prefill T random tokens per sequence in calls of `chunk`; on_out sees each call's StepOutput.
// Each call's tokens are made on the host and copied over: inside a timed prefill, a negligible
// part of it.
template <class F>
void prefill(model::InferenceSession& s, int64_t T, int64_t chunk, int64_t vocab, uint64_t seed,
             Device dev, F&& on_out) {
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t n = std::min(chunk, T - t0);
    on_out(s.prefill(random_tokens(s.batch(), n, vocab, seed + static_cast<uint64_t>(t0), dev)));
  }
}

// The gates' thresholds for a fire rate r: block by block (earlier blocks already set), tau_k =
// the (1 - r) quantile of block k's gate entropies over calibration decode steps of random
// tokens (as the timed steps); r = 0: +inf, r = 1: -inf.
void calibrate_gates(model::AmorModel& m, double rate, Device dev, const model::ModelConfig& cfg) {
  const int64_t K = m.num_blocks();
  std::vector<model::AmorGateState> st = m.gate_state();
  const double offset = cfg.amor.offset_mode == "fixed" ? cfg.amor.fixed_offset : 0.0;
  auto set_tau = [&](int64_t k, double tau) {
    st[static_cast<size_t>(k)] = {tau - offset, 0.0};  // adaptive: tau = m + kappa * 0
    m.set_gate_state(st);
  };
  for (int64_t k = 0; k < K; ++k) {
    if (rate <= 0.0 || rate >= 1.0) {
      set_tau(k, rate <= 0.0 ? 1e30 : -1e30);
      continue;
    }
    std::vector<double> h;
    model::InferenceSession s(m, kCalibrationBatch);
    prefill(s, kCalibrationPrompt, kCalibrationPrompt, cfg.vocab, 12345, dev, [](const model::StepOutput&) {});
    for (int64_t i = 0; i < kCalibrationSteps; ++i) {
      model::StepOutput o = s.step(random_tokens(kCalibrationBatch, 1, cfg.vocab, 20000 + uint64_t(i), dev));
      auto v = o.gate_entropy[static_cast<size_t>(k)].to(Device::CPU).to(DType::F64).to_vector<double>();
      h.insert(h.end(), v.begin(), v.end());
    }
    std::sort(h.begin(), h.end());
    const auto idx = static_cast<size_t>(std::clamp<double>(std::floor((1.0 - rate) * double(h.size())), 0.0,
                                                            double(h.size() - 1)));
    set_tau(k, h[idx]);
  }
}

// Every block's router with random weights (router_init; the width of the paper's fitted router).
std::shared_ptr<const model::EntropyRouter> random_router(const model::AmorModel& m, const model::ModelConfig& cfg,
                                                          uint64_t seed) {
  auto r = std::make_shared<model::EntropyRouter>();
  for (int64_t k = 0; k < m.num_blocks(); ++k)
    r->blocks.push_back(model::router_init(cfg.d_model, kRouterWidth, seed + 1000 + static_cast<uint64_t>(k), kRouterBias));
  return r;
}

// The weights drawn from each parameter's own init distribution, one RNG stream per parameter
// (seeded by seed and its index) so that the parameters can be drawn on every core: a 1.5B model
// draws in seconds instead of the tens of seconds ParamStore::initialize's one stream takes.
// Speed does not depend on the values; they are not the values a training run with this seed
// starts from.
void initialize_in_parallel(model::LanguageModel& m, uint64_t seed) {
  const auto& params = m.params().params();
  const size_t n = params.size();
  const unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32u));
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        try {
          std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + i);
          params[i]->init(params[i]->value, rng);
        } catch (...) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      }
    });
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

struct Row {
  std::string run, kind, device, dtype, note, amor_form, gate;
  int64_t params = 0, batch = 0, context = 0;
  double fire_target = NAN, prefill_ms = NAN, prefill_tok_s = NAN, decode_ms = NAN, decode_tok_s = NAN,
         fire_decode = NAN, graph_ms = NAN, graph_tok_s = NAN;
};

std::string num(double x, int digits) { return std::isnan(x) ? "" : fmt::format("{:.{}f}", x, digits); }

void print_header(std::ostream& out) {
  out << fmt::format("{:<34} {:>6} {:>8} {:>6} {:>6} {:>7} {:>11} {:>12} {:>10} {:>12} {:>6} {:>9} {:>12}  {}\n",
                     "run", "batch", "context", "fire", "form", "gate", "prefill_ms", "prefill_t/s", "decode_ms",
                     "decode_t/s", "fired", "graph_ms", "graph_t/s", "note");
}

void print_row(std::ostream& out, const Row& r) {
  out << fmt::format("{:<34} {:>6} {:>8} {:>6} {:>6} {:>7} {:>11} {:>12} {:>10} {:>12} {:>6} {:>9} {:>12}  {}\n",
                     r.run, r.batch, r.context, num(r.fire_target, 2), r.amor_form, r.gate, num(r.prefill_ms, 1),
                     num(r.prefill_tok_s, 0),
                     num(r.decode_ms, 3), num(r.decode_tok_s, 1), num(r.fire_decode, 3), num(r.graph_ms, 3),
                     num(r.graph_tok_s, 1), r.note);
  out.flush();
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    AMOR_CHECK(f, "bench-decode: cannot write '{}'", tmp);
    f << "run,kind,params,device,dtype,batch,context,fire_target,prefill_ms,prefill_tok_s,decode_ms,"
         "decode_tok_s,fire_decode,graph_ms,graph_tok_s,note,amor_form,gate\n";
    for (const Row& r : rows)
      f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\",{},{}\n", r.run, r.kind, r.params,
                       r.device, r.dtype, r.batch, r.context, num(r.fire_target, 4), num(r.prefill_ms, 3),
                       num(r.prefill_tok_s, 1), num(r.decode_ms, 4), num(r.decode_tok_s, 2), num(r.fire_decode, 4),
                       num(r.graph_ms, 4), num(r.graph_tok_s, 2), r.note, r.amor_form, r.gate);
    AMOR_CHECK(f.good(), "bench-decode: writing '{}' failed", tmp);
  }
  fs::rename(tmp, path);
}

// One (batch, context) measurement of a model whose gates are already set.
void measure(model::LanguageModel& m, const Options& o, Device dev, Row& r) {
  Backend& be = backend(dev);
  auto* amor_m = dynamic_cast<model::AmorModel*>(&m);
  model::InferenceSession s(m, r.batch);
  s.use_graphs(false);  // the eager steps first, whatever AMOR_DECODE_GRAPHS says
  // The context and every step below (warm-up, eager, graphed): the KV caches are sized once, so
  // a context fits if it fits, not only if twice it does while a cache regrows.
  s.reserve_tokens(r.context + 2 * (o.steps + 2));
  be.synchronize();
  auto t0 = std::chrono::steady_clock::now();
  prefill(s, r.context, o.prefill_chunk, m.config().vocab, 777, dev, [](const model::StepOutput&) {});
  be.synchronize();
  const double prefill_s = seconds_since(t0);
  r.prefill_ms = 1e3 * prefill_s;
  r.prefill_tok_s = double(r.batch * r.context) / prefill_s;

  // The steps' tokens, made before the clock starts (random, as the calibration's: a random
  // model's greedy tokens fall into a loop of one entropy value, which no threshold splits).
  std::vector<Tensor> tokens;
  for (int64_t i = 0; i < o.steps + 2; ++i)
    tokens.push_back(random_tokens(r.batch, 1, m.config().vocab, (1u << 30) + uint64_t(i), dev));
  for (int w = 0; w < 2; ++w) s.step(tokens[static_cast<size_t>(o.steps + w)]);  // untimed warm-up
  std::vector<Tensor> gates;
  be.synchronize();
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.steps; ++i) {
    model::StepOutput out = s.step(tokens[static_cast<size_t>(i)]);
    if (amor_m) gates.insert(gates.end(), out.gates.begin(), out.gates.end());
  }
  be.synchronize();
  const double decode_s = seconds_since(t0);
  r.decode_ms = 1e3 * decode_s / double(o.steps);
  r.decode_tok_s = double(r.batch * o.steps) / decode_s;
  if (amor_m && !gates.empty()) {
    double fired = 0, n = 0;
    for (const Tensor& g : gates) {
      for (uint8_t x : g.to(Device::CPU).to_vector<uint8_t>()) fired += x;
      n += double(g.numel());
    }
    r.fire_decode = fired / n;
  }
  if (!o.graphs) return;
  // The same session goes on with CUDA graphs: two untimed steps (the capture, then the first
  // replay), then the same number of timed steps on the same tokens.
  s.use_graphs(true);
  if (!s.graph_blocker().empty()) {
    r.note = "graphs: " + s.graph_blocker();
    return;
  }
  for (int w = 0; w < 2; ++w) s.step(tokens[static_cast<size_t>(o.steps + w)]);
  AMOR_CHECK(s.last_step_graphed(), "bench-decode: the session did not replay a graph");
  be.synchronize();
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.steps; ++i) s.step(tokens[static_cast<size_t>(i)]);
  be.synchronize();
  const double graph_s = seconds_since(t0);
  r.graph_ms = 1e3 * graph_s / double(o.steps);
  r.graph_tok_s = double(r.batch * o.steps) / graph_s;
}

// An untimed prefill of one chunk and a few steps at batch B: the first calls of a shape build
// cuDNN's attention graphs and fill the allocator's cache (on the H200 the transformer's first
// 1K-token prefill took 1.66 s, the same prefill 0.23 s after it). Out of memory here is left
// to the timed rows to report.
void warm_up(model::LanguageModel& m, const Options& o, Device dev, int64_t B) {
  Row w;
  w.batch = B;
  w.context = std::min(o.prefill_chunk, *std::min_element(o.contexts.begin(), o.contexts.end()));
  Options wo = o;
  wo.steps = 2;
  try {
    measure(m, wo, dev, w);
  } catch (const std::exception& e) {
    if (!is_oom(e)) throw;
  }
}

int run(const Options& o, std::ostream& out) {
  config::ExpandOptions eo;
  eo.resolve = [](config::RunConfig& cfg, const config::KeyLocations& set_at) { apply_model_preset(cfg, set_at); };
  eo.check_tokenizer_vocab = false;  // random tokens: the data section is not read
  const std::vector<config::RunSpec> runs = config::expand_sweep({o.sweep}, o.overrides, eo);
  AMOR_CHECK(!runs.empty(), "{}: the sweep has no runs", o.sweep);
  const Device dev = o.device == "cuda" ? Device::CUDA : Device::CPU;
  const DType dt = o.dtype == "bf16" ? DType::BF16 : DType::F32;
  std::vector<Row> rows;
  print_header(out);
  for (const config::RunSpec& spec : runs) {
    const model::ModelConfig& mc = spec.config.model;
    auto m = model::build_model(mc, dt);
    initialize_in_parallel(*m, static_cast<uint64_t>(spec.config.train.seed));
    m->params().to(dev);
    auto* amor_m = dynamic_cast<model::AmorModel*>(m.get());
    const std::vector<double> rates = amor_m ? o.fire_rates : std::vector<double>{NAN};
    std::vector<std::string> forms{""};
    if (amor_m) forms = !o.amor_forms.empty() ? o.amor_forms
                                              : std::vector<std::string>{amor_m->sparse_inference() ? "sparse" : "dense"};
    const std::vector<std::string> gates = amor_m ? o.gates : std::vector<std::string>{""};
    for (const std::string& gate : gates)
    for (const std::string& form : forms)
    for (double rate : rates) {
      if (amor_m) {
        // A random router (the fitted one's shape: its cost does not depend on its values), its
        // thresholds calibrated on its own predictions as the LM-head gate's are on its entropies.
        amor_m->set_entropy_router(gate == "router" ? random_router(*amor_m, mc, spec.config.train.seed)
                                                    : nullptr);
        // The gates are calibrated in the form timed (both give the same entropies).
        amor_m->set_sparse_inference(form == "sparse");
        calibrate_gates(*amor_m, rate, dev, mc);
      }
      for (int64_t B : o.batches) {
        warm_up(*m, o, dev, B);
        for (int64_t C : o.contexts) {
          Row r;
          r.run = spec.name;
          r.kind = mc.kind;
          r.params = m->params().numel();
          r.device = o.device;
          r.dtype = o.dtype;
          r.batch = B;
          r.context = C;
          r.fire_target = rate;
          r.amor_form = form;
          r.gate = gate;
          bool stop = false;
          try {
            measure(*m, o, dev, r);
          } catch (const std::exception& e) {
            if (!is_oom(e)) throw;
            r.note = "out of memory: larger contexts skipped at this batch";
            stop = true;
          }
          print_row(out, r);
          rows.push_back(r);
          write_csv(o.out, rows);  // every row as it comes: a later failure keeps the earlier ones
          if (stop) break;
        }
      }
    }
  }
  out << "wrote " << o.out << " (" << rows.size() << " rows)\n";
  return 0;
}

}  // namespace

bool is_bench_decode(int argc, const char* const* argv) {
  return argc >= 2 && std::string(argv[1]) == "bench-decode";
}

int bench_decode_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return run_subcommand("bench-decode", kUsage, out, err, [&] { return run(parse(args), out); });
}

}  // namespace amor
