// Helpers shared by the run.h5 tests (run_file_test.cpp, run_file_swmr_test.cpp): a scratch
// folder per test, the h5py checker (tests/h5_reader_check.py), sample attributes, layouts and
// rows, and the JSON the checker compares the file against. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <thread>

#include "data/json/json.h"
#include "kernels/core/error.h"
#include "runner/output/hdf5_util.h"
#include "runner/output/run_file.h"

namespace amor {

namespace fs = std::filesystem;
using json::Array;
using json::Object;
using json::Value;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class RunFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/amor_run_file_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string dir_;
};

inline int python(const std::string& args) {
  std::string cmd = fmt::format("{} {}/tests/h5_reader_check.py {}", AMOR_PYTHON, AMOR_SOURCE_DIR, args);
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline Value num(double v) { return std::isnan(v) ? Value(nullptr) : Value(v); }
template <class T> Value nums(const std::vector<T>& v) {
  Array a;
  for (T x : v) {
    if constexpr (std::is_floating_point_v<T>)
      a.push_back(num(static_cast<double>(x)));
    else
      a.push_back(Value(static_cast<int64_t>(x)));
  }
  return Value(std::move(a));
}

inline RunAttrs attrs_for(const std::string& run) {
  RunAttrs a;
  a.config = "model:\n  kind: amor\n  amor:\n    kappa: 0.2  # τ = m + κ·s\ntrain:\n  lr: 0.001\n";
  a.config_hash = "3f2a9c0d1e2b4c5d6e7f8091a2b3c4d5e6f70812";
  a.sweep = "quickstart";
  a.run_name = run;
  a.amor_run_version = "0.1.0";
  a.git_commit = "0123456789abcdef0123456789abcdef01234567+dirty";
  a.world_size = 2;
  a.threads = 3;
  a.created = "2025-06-01T12:00:00Z";
  return a;
}

inline Value attrs_json(const RunAttrs& a, int K, const std::string& finished) {
  return Value(Object{{"config", a.config},
                      {"config_hash", a.config_hash},
                      {"sweep", a.sweep},
                      {"run_name", a.run_name},
                      {"amor_run_version", a.amor_run_version},
                      {"git_commit", a.git_commit},
                      {"created", a.created},
                      {"finished", finished},
                      {"world_size", a.world_size},
                      {"threads", a.threads},
                      {"amor_blocks", K},
                      {"layout_version", RunFile::kLayoutVersion}});
}

// Training rows, as written, and as the JSON the reader compares against.
struct TrainLog {
  int K;
  std::vector<TrainRow> rows;
  Value json() const {
    Object o;
    auto col = [&](const char* name, auto get) {
      Array a;
      for (const auto& r : rows) a.push_back(get(r));
      o.emplace_back(name, Value(std::move(a)));
    };
    col("step", [](const TrainRow& r) { return Value(r.step); });
    col("tokens", [](const TrainRow& r) { return Value(r.tokens); });
    col("loss", [](const TrainRow& r) { return num(r.loss); });
    col("lr", [](const TrainRow& r) { return num(r.lr); });
    col("grad_norm", [](const TrainRow& r) { return num(r.grad_norm); });
    col("tokens_per_s", [](const TrainRow& r) { return num(r.tokens_per_s); });
    // The model's columns (gate_columns below), NaN where a row left them out.
    auto column = [&](const char* name, int width) {
      Array a;
      for (const auto& r : rows) {
        auto it = r.columns.find(name);
        for (int k = 0; k < width; ++k)
          a.push_back(num(it == r.columns.end() || it->second.empty() ? kNaN : it->second[static_cast<size_t>(k)]));
      }
      o.emplace_back(name, Value(std::move(a)));
    };
    column("fire_rate", 1);
    column("tau", 1);
    column("block_fire_rate", K);
    column("block_tau", K);
    return Value(std::move(o));
  }
};

// The rows the writer child processes log: loss = 10 / step (h5_reader_check.py swmr knows it).
inline TrainRow formula_row(int64_t s, int K) {
  TrainRow r;
  r.step = s;
  r.tokens = s * 4096;
  r.loss = 10.0 / static_cast<double>(s);
  r.lr = 1e-3 * static_cast<double>(s) / 100.0;
  r.grad_norm = 1.0 + static_cast<double>(s) / 64.0;
  r.tokens_per_s = 1000.0 + static_cast<double>(s);
  r.columns["fire_rate"] = {0.25};
  r.columns["tau"] = {0.3 + static_cast<double>(s) / 1024.0};
  for (int k = 0; k < K; ++k) {
    r.columns["block_fire_rate"].push_back(0.125 * (k + 1));
    r.columns["block_tau"].push_back(0.5 + static_cast<double>(k * 1000 + s) / 4096.0);
  }
  return r;
}

// The entropy-gate columns every model kind declares (LanguageModel::metric_columns, K gate rows):
// the layout tests/h5_reader_check.py expects.
inline std::vector<TrainColumn> gate_columns(int64_t K) {
  return {{"fire_rate", {}}, {"tau", {}}, {"block_fire_rate", {K}}, {"block_tau", {K}}};
}

// The token columns every model kind declares today (LanguageModel::token_columns's default):
// what tests/h5_reader_check.py checks.
inline std::vector<TokenColumn> gate_token_columns(int64_t K) {
  return {{"mode", "", 1}, {"gate", "amor_blocks", K}};
}

inline const std::vector<uint8_t>& column(const TokenSequences& s, const std::string& name) {
  static const std::vector<uint8_t> none;
  auto it = s.columns.find(name);
  return it == s.columns.end() ? none : it->second;
}

inline Value empty_token_set() {
  return Value(Object{{"step", -1},
                      {"lengths", Array{}},
                      {"token_ids", Array{}},
                      {"entropy", Array{}},
                      {"loss", Array{}},
                      {"mode", Array{}},
                      {"gate", Array{}}});
}

inline Value token_json(int64_t step, const TokenSequences& s, size_t total) {
  std::vector<uint8_t> mode = column(s, "mode").empty() ? std::vector<uint8_t>(total, 0) : column(s, "mode");
  return Value(Object{{"step", step},
                      {"lengths", nums(s.lengths)},
                      {"token_ids", nums(s.token_ids)},
                      {"entropy", nums(s.entropy)},
                      {"loss", nums(s.loss)},
                      {"mode", nums(mode)},
                      {"gate", nums(column(s, "gate"))}});
}

// Concatenates two batches of sequences (gate rows interleave per block).
inline TokenSequences concat(const TokenSequences& a, const TokenSequences& b, int K) {
  TokenSequences c;
  auto cat = [](auto x, const auto& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  c.lengths = cat(a.lengths, b.lengths);
  c.token_ids = cat(a.token_ids, b.token_ids);
  c.entropy = cat(a.entropy, b.entropy);
  c.loss = cat(a.loss, b.loss);
  c.columns["mode"] = cat(column(a, "mode"), column(b, "mode"));
  size_t na = a.token_ids.size(), nb = b.token_ids.size();
  const auto &ga = column(a, "gate"), &gb = column(b, "gate");
  auto& gate = c.columns["gate"];
  for (int k = 0; k < K; ++k) {
    gate.insert(gate.end(), ga.begin() + k * na, ga.begin() + (k + 1) * na);
    gate.insert(gate.end(), gb.begin() + k * nb, gb.begin() + (k + 1) * nb);
  }
  return c;
}

inline TokenSequences random_sequences(std::mt19937& rng, std::vector<int64_t> lengths, int K, bool with_mode) {
  TokenSequences s;
  s.lengths = lengths;
  int64_t total = 0;
  for (auto l : lengths) total += l;
  std::uniform_int_distribution<int32_t> tok(0, 128255);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  for (int64_t i = 0; i < total; ++i) {
    s.token_ids.push_back(tok(rng));
    s.entropy.push_back(unit(rng));
    s.loss.push_back(i == total - 1 ? std::numeric_limits<float>::quiet_NaN() : 5.f * unit(rng));
    if (with_mode) s.columns["mode"].push_back(static_cast<uint8_t>(rng() % 2));
  }
  auto& gate = s.columns["gate"];
  for (int64_t i = 0; i < K * total; ++i) gate.push_back(static_cast<uint8_t>(rng() % 2));
  return s;
}

inline RunLayout amor_layout() {
  RunLayout L;
  L.token_columns = gate_token_columns(3);
  L.train_columns = gate_columns(3);
  L.eval_tasks = {{"mqar", {"accuracy", "loss"}, {"correct"}},
                  {"lambada_openai", {"acc", "perplexity"}, {"correct", "logprob"}}};
  L.token_sets = {"validation", "niah_4k"};
  return L;
}

// Waits for a child to exit (bounded), killing it if it does not; returns its exit status.
inline int reap(pid_t pid, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

inline bool wait_for_file(const std::string& p, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!fs::exists(p)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}


template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs stmt, expects an amor::Error whose message contains every given part.
#define EXPECT_ERROR(stmt, ...)                                  \
  do {                                                           \
    std::string msg = error_of([&] { stmt; });                   \
    for (const char* part : {__VA_ARGS__})                       \
      EXPECT_NE(msg.find(part), std::string::npos) << msg;       \
  } while (0)

}  // namespace amor
