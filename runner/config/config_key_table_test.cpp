// The key table of runner/config/README.md is the one key_table_markdown() makes from the
// declare_keys listings, row for row: a key added, removed, re-ranged or re-documented in the
// listings fails here until the README is regenerated (`amor-run --print-config-keys`).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runner/config/key_table.h"
#include "runner/config/schema.h"

namespace amor::config {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

// The README's table: from its header row to the first line that is not a table row.
std::vector<std::string> readme_table() {
  std::ifstream f(std::string(AMOR_SOURCE_DIR) + "/runner/config/README.md");
  EXPECT_TRUE(f) << "runner/config/README.md";
  std::vector<std::string> out;
  bool in = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("| key | type / values | default | notes |", 0) == 0) in = true;
    if (in && line.rfind("|", 0) != 0) break;
    if (in) out.push_back(line);
  }
  return out;
}

TEST(ConfigKeyTable, ReadmeTableIsTheGeneratedOne) {
  const std::vector<std::string> want = lines_of(key_table_markdown()), got = readme_table();
  ASSERT_FALSE(got.empty()) << "runner/config/README.md has no key table";
  const std::string fix = "; regenerate the table with `build/bin/amor-run --print-config-keys` "
                          "and paste it into runner/config/README.md";
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i)
    ASSERT_EQ(got[i], want[i]) << "row " << i + 1 << " differs" << fix;
  ASSERT_EQ(got.size(), want.size()) << "the README table has " << got.size() << " rows, the "
                                     << "declarations make " << want.size() << fix;
}

TEST(ConfigKeyTable, OneRowPerKeyInListingOrder) {
  const std::vector<std::string> rows = lines_of(key_table_markdown());
  ASSERT_EQ(rows.size(), fields().size() + 2);  // header and separator
  // Listing order: model.* first (model.kind before model.mamba2.*), device last.
  EXPECT_EQ(rows[2].rfind("| `model.preset` |", 0), 0u) << rows[2];
  EXPECT_EQ(rows[3].rfind("| `model.kind` |", 0), 0u) << rows[3];
  EXPECT_EQ(rows.back().rfind("| `device` |", 0), 0u) << rows.back();
}

#define EXPECT_PREFIX(text, prefix) EXPECT_EQ((text).substr(0, std::string(prefix).size()), prefix)

TEST(ConfigKeyTable, DescribesValuesAsDeclared) {
  auto row = [](const char* key) {
    for (const std::string& r : lines_of(key_table_markdown()))
      if (r.rfind(std::string("| `") + key + "` |", 0) == 0) return r;
    return std::string("(no row)");
  };
  EXPECT_EQ(row("model.d_model"), "| `model.d_model` | int in [1, 2^40] | `64` | the width |");
  EXPECT_EQ(row("train.steps"), "| `train.steps` | int ≥ 0 | `1000` | optimizer steps |");
  EXPECT_EQ(row("model.amor.blocks"),
            "| `model.amor.blocks` | 1 \\| 3 | `3` | K: post-hoc attention blocks (the paper's 1 or 3) |");
  EXPECT_EQ(row("model.amor.momentum"),
            "| `model.amor.momentum` | float in [0, 1] | `0.99` | EMA momentum; 1 freezes τ at its "
            "initial value (an ablation) |");
  EXPECT_EQ(row("train.beta1"), "| `train.beta1` | float in [0, 1) | `0.9` | |");
  EXPECT_EQ(row("model.norm_eps"),
            "| `model.norm_eps` | float > 0 | `1e-05` | RMSNorm epsilon; the per-location epsilon "
            "keys at 0 take it |");
  EXPECT_PREFIX(row("checkpoint.signal"), "| `checkpoint.signal` | SIGUSR1 \\| SIGUSR2 \\| \"\" | `SIGUSR1` |");
  EXPECT_PREFIX(row("eval.niah.lengths"), "| `eval.niah.lengths` | list of int ≥ 1 | `[256, 512]`");
  EXPECT_PREFIX(row("eval.niah.depths"), "| `eval.niah.depths` | list of floats in [0, 100] | `[0.0, 50.0, 100.0]`");
  EXPECT_PREFIX(row("model.pattern"), "| `model.pattern` | string of A, M, G | `\"\"` |");
  EXPECT_PREFIX(row("eval.tasks"), "| `eval.tasks` | list of strings | `[]` |");
  EXPECT_PREFIX(row("model.recompute"), "| `model.recompute` | bool | `false` |");
}

}  // namespace
}  // namespace amor::config
