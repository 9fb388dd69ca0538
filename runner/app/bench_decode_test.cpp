// amor-run bench-decode on the CPU with tiny models: one CSV row per (run, batch, context, fire
// rate) with positive times, AMOR's gates at fire rates 0 and 1 fire on none and on every decode
// token (the calibration sets tau = +inf / -inf) and at 0.5 on some (so the weights are
// initialised: zero weights would make every entropy exactly 1), and usage errors exit 2.
#include "runner/app/bench_decode.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace amor {
namespace {

namespace fs = std::filesystem;

fs::path write_sweep(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("bench_decode_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "sweep.yaml") << R"(name: bench
base:
  model:
    vocab: 64
    d_model: 16
    n_layers: 2
    d_ff: 32
    head_dim: 8
    mamba2: {head_dim: 8, d_state: 4, chunk: 8}
    gdn: {head_dim: 8, chunk: 8}
    amor: {blocks: 3, backbone: gdn}
sweep:
  zip:
    model.kind: [transformer, amor]
)";
  return dir;
}

std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.push_back("");  // an empty last column
    rows.push_back(cells);
  }
  return rows;
}

TEST(BenchDecode, RowsPerRunBatchContextAndRate) {
  const fs::path dir = write_sweep("rows");
  std::ostringstream out, err;
  const int rc = bench_decode_main({(dir / "sweep.yaml").string(), "--device", "cpu", "--batch", "1,3",
                                    "--context", "20,9", "--steps", "4", "--prefill-chunk", "8",
                                    "--fire-rate", "0,0.5,1", "--out", (dir / "b.csv").string()},
                                   out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  const auto rows = read_csv(dir / "b.csv");
  ASSERT_FALSE(rows.empty());
  const std::vector<std::string> header{"run", "kind", "params", "device", "dtype", "batch", "context",
                                        "fire_target", "prefill_ms", "prefill_tok_s", "decode_ms",
                                        "decode_tok_s", "fire_decode", "graph_ms", "graph_tok_s",
                                        "note", "amor_form", "gate"};
  EXPECT_EQ(rows[0], header);
  // transformer: 2 batches x 2 contexts; amor: 3 rates x 2 x 2.
  ASSERT_EQ(rows.size(), 1u + 4u + 12u);
  int amor_rows = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& r = rows[i];
    ASSERT_EQ(r.size(), header.size()) << i;
    EXPECT_GT(std::stod(r[8]), 0.0);   // prefill_ms
    EXPECT_GT(std::stod(r[10]), 0.0);  // decode_ms
    EXPECT_EQ(r[3], "cpu");
    EXPECT_EQ(r[4], "f32");
    if (i <= 4) {
      EXPECT_EQ(r[1], "transformer");
      EXPECT_EQ(r[12], "");  // no gates
      EXPECT_EQ(r[16], "");  // no AMOR form
      EXPECT_EQ(r[17], "");  // no gate
      // contexts ascending whatever order they were given in
      EXPECT_EQ(r[6], (i % 2 == 1) ? "9" : "20");
      continue;
    }
    ++amor_rows;
    EXPECT_EQ(r[1], "amor");
    EXPECT_EQ(r[16], "sparse");  // the default form
    EXPECT_EQ(r[17], "lm-head");  // the default gate
    const double target = std::stod(r[7]), fired = std::stod(r[12]);
    if (target == 0.0) {
      EXPECT_EQ(fired, 0.0);
    }
    if (target == 1.0) {
      EXPECT_EQ(fired, 1.0);
    }
    if (target == 0.5) {
      EXPECT_GT(fired, 0.0);
      EXPECT_LT(fired, 1.0);
    }
  }
  EXPECT_EQ(amor_rows, 12);
  EXPECT_NE(out.str().find("decode_t/s"), std::string::npos);
  fs::remove_all(dir);
}

// --graphs on the cpu: no graph times, and the note says why.
TEST(BenchDecode, GraphsColumnsEmptyWithTheReasonOnTheCpu) {
  const fs::path dir = write_sweep("graphs");
  std::ostringstream out, err;
  const int rc = bench_decode_main({(dir / "sweep.yaml").string(), "--device", "cpu", "--batch", "1",
                                    "--context", "9", "--steps", "2", "--fire-rate", "0.5", "--graphs",
                                    "--out", (dir / "b.csv").string()},
                                   out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  const auto rows = read_csv(dir / "b.csv");
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 18u) << i;
    EXPECT_GT(std::stod(rows[i][10]), 0.0);  // the eager decode_ms
    EXPECT_EQ(rows[i][13], "");              // graph_ms
    EXPECT_NE(rows[i][15].find("graphs: the model is on the cpu"), std::string::npos) << rows[i][15];
  }
  fs::remove_all(dir);
}

// --amor-form sparse,dense: AMOR's rows once per form (the form in the last column), the gates
// calibrated in each to the same rates; the other kinds once, with no form.
TEST(BenchDecode, AmorFormsEachTimed) {
  const fs::path dir = write_sweep("forms");
  std::ostringstream out, err;
  const int rc = bench_decode_main({(dir / "sweep.yaml").string(), "--device", "cpu", "--batch", "2",
                                    "--context", "9", "--steps", "4", "--fire-rate", "0,1",
                                    "--amor-form", "sparse,dense", "--out", (dir / "b.csv").string()},
                                   out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  const auto rows = read_csv(dir / "b.csv");
  ASSERT_EQ(rows.size(), 1u + 1u + 4u);  // transformer once; amor 2 forms x 2 rates
  EXPECT_EQ(rows[1][16], "");
  const std::vector<std::pair<std::string, std::string>> want{{"sparse", "0.0000"}, {"sparse", "1.0000"},
                                                              {"dense", "0.0000"}, {"dense", "1.0000"}};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& r = rows[2 + i];
    ASSERT_EQ(r.size(), 18u);
    EXPECT_EQ(r[16], want[i].first) << i;
    EXPECT_EQ(r[7], want[i].second) << i;
    EXPECT_EQ(std::stod(r[12]), std::stod(want[i].second)) << i;  // fired as calibrated
  }
  EXPECT_NE(out.str().find(" dense "), std::string::npos);
  fs::remove_all(dir);
}

// --gate lm-head,router: AMOR's rows once per gate input (the gate in the last column), each
// calibrated on its own gate values: none fires at 0, every token at 1, some at 0.5 (the random
// router's predictions differ from token to token).
TEST(BenchDecode, AmorGatesEachTimed) {
  const fs::path dir = write_sweep("gates");
  std::ostringstream out, err;
  const int rc = bench_decode_main({(dir / "sweep.yaml").string(), "--device", "cpu", "--batch", "2",
                                    "--context", "9", "--steps", "8", "--fire-rate", "0,0.5,1",
                                    "--gate", "lm-head,router", "--out", (dir / "b.csv").string()},
                                   out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  const auto rows = read_csv(dir / "b.csv");
  ASSERT_EQ(rows.size(), 1u + 1u + 6u);  // transformer once; amor 2 gates x 3 rates
  EXPECT_EQ(rows[1][17], "");
  for (size_t i = 0; i < 6; ++i) {
    const auto& r = rows[2 + i];
    ASSERT_EQ(r.size(), 18u);
    EXPECT_EQ(r[17], i < 3 ? "lm-head" : "router") << i;
    const double target = std::stod(r[7]), fired = std::stod(r[12]);
    if (target == 0.5) {
      EXPECT_GT(fired, 0.0) << i;
      EXPECT_LT(fired, 1.0) << i;
    } else {
      EXPECT_EQ(fired, target) << i;
    }
  }
  EXPECT_NE(out.str().find(" router "), std::string::npos);
  fs::remove_all(dir);
}

TEST(BenchDecode, UsageErrorsExitTwo) {
  const fs::path dir = write_sweep("usage");
  const std::string sweep = (dir / "sweep.yaml").string();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, {sweep, "--batch", "0"}, {sweep, "--context", "1,,2"},
        {sweep, "--fire-rate", "1.5"}, {sweep, "--dtype", "f16"}, {sweep, "--bogus"}, {sweep, sweep},
        {sweep, "--amor-form", "sparse,fast"}, {sweep, "--gate", "lm-head,mlp"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(bench_decode_main(args, out, err), 2) << err.str();
    EXPECT_NE(err.str().find("usage: amor-run bench-decode"), std::string::npos);
  }
  std::ostringstream out, err;
  EXPECT_EQ(bench_decode_main({(dir / "missing.yaml").string(), "--device", "cpu"}, out, err), 1);
  EXPECT_NE(err.str().find("missing.yaml"), std::string::npos) << err.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace amor
