// Tests of the canonical config text and its hash: FNV-1a test vectors, sorted full output,
// round trips through JSON and YAML, a pinned hash, and a changed hash for any changed key.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "data/json/json.h"
#include "runner/config/canonical.h"
#include "runner/config/config_test_util.h"
#include "runner/config/schema.h"

namespace amor::config {
namespace {

RunConfig resolved_defaults() { return load_run_config_yaml("{}"); }

TEST(ConfigCanonical, Fnv1aVectors) {
  // Published FNV-1a 64 test vectors (Fowler/Noll/Vo reference test suite).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(hash8("a"), "af63dc4c");
  EXPECT_EQ(hash8("foobar"), "85944171");
}

TEST(ConfigCanonical, JsonHoldsEveryKeySorted) {
  std::string text = canonical_json(resolved_defaults());
  json::Value v = json::parse(text);
  size_t leaves = 0;
  // Walks the parsed JSON: every object's keys are sorted, and every leaf is a schema key.
  std::function<void(const json::Value&, const std::string&)> walk = [&](const json::Value& n,
                                                                          const std::string& at) {
    if (!n.is_object()) {
      EXPECT_NE(find_field(at), nullptr) << at;
      ++leaves;
      return;
    }
    std::string prev;
    for (const auto& [k, child] : n.as_object()) {
      EXPECT_LT(prev, k) << "keys not sorted under '" << at << "'";
      prev = k;
      walk(child, at.empty() ? k : at + "." + k);
    }
  };
  walk(v, "");
  // Keys declared omitted_at_default are left out at their defaults (here all of them).
  size_t omitted = 0;
  for (const Field& f : fields()) omitted += f.allowed.omit_at_default ? 1 : 0;
  EXPECT_EQ(leaves + omitted, fields().size());
  EXPECT_NE(text.find("\n  \"device\": \"cpu\",\n"), std::string::npos);
  EXPECT_NE(text.find("\"rope_base\": 10000.0,"), std::string::npos);  // floats stay floats
  EXPECT_NE(text.find("\"eps\": 1e-08,"), std::string::npos);
  EXPECT_NE(text.find("\"tasks\": []"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

TEST(ConfigCanonical, PinnedHashOfTheDefaults) {
  // Pins cross-platform, cross-version stability: this changes only when the schema or a default
  // changes (which re-identifies every run, so it should be a deliberate edit).
  EXPECT_EQ(hash8(canonical_json(resolved_defaults())), "96e5c5c0");
}

TEST(ConfigCanonical, YamlHasTheSameContent) {
  std::string yaml = canonical_yaml(resolved_defaults());
  EXPECT_EQ(yaml.substr(0, 12), "checkpoint:\n");
  EXPECT_NE(yaml.find("\ndevice: \"cpu\"\n"), std::string::npos);
  EXPECT_NE(yaml.find("\n  amor:\n    backbone: \"gdn\"\n"), std::string::npos);
}

// A valid value of `f` different from `v`.
FieldValue another_value(const Field& f, const FieldValue& v) {
  switch (f.type) {
    case FieldType::Bool: return !std::get<bool>(v);
    case FieldType::Int: {
      // Integers from a set ("1|3"): another member of it.
      for (const std::string& c : keys::choice_list(f.allowed.one_of))
        if (std::stoll(c) != std::get<int64_t>(v)) return static_cast<int64_t>(std::stoll(c));
      return std::get<int64_t>(v) + 1;
    }
    case FieldType::Float: {
      double x = std::get<double>(v);
      return x > 0 && x < 1 ? x / 2 : x + 0.5;  // stays within [0,1) and positive ranges
    }
    case FieldType::String:
      if (f.key == "model.pattern") return std::string("MA");
      if (f.key == "model.oryx.schedule") return std::string("linear:4,attention:*");
      return std::get<std::string>(v) + "x";
    case FieldType::Enum:
      for (const std::string& c : f.choices)
        if (c != std::get<std::string>(v) && c != "auto" && c != "bf16" && c != "cuda" &&
            c != "serial" && c != "shards")
          return c;
      return v;
    case FieldType::StringList: {
      auto l = std::get<std::vector<std::string>>(v);
      l.push_back("extra");
      return l;
    }
    case FieldType::IntList: {
      auto l = std::get<std::vector<int64_t>>(v);
      l.push_back(l.empty() ? 1 : l.back() + 1);
      return l;
    }
    case FieldType::FloatList: {
      auto l = std::get<std::vector<double>>(v);
      l.push_back(l.empty() ? 0.5 : l.back() / 3);  // stays within [0, 100] and not an integer
      return l;
    }
  }
  return v;
}

TEST(ConfigCanonical, AnyChangedKeyChangesTheHashAndRoundTrips) {
  const RunConfig base = resolved_defaults();
  const std::string base_text = canonical_json(base);
  std::set<std::string> hashes = {hash8(base_text)};
  for (const Field& f : fields()) {
    if (f.key == "device") continue;  // cuda needs bf16; covered below
    RunConfig c = base;
    FieldValue changed = another_value(f, f.get(c));
    ASSERT_NE(changed, f.get(c)) << f.key;
    f.set(c, changed);
    if (f.key == "data.mqar.pair_targets") c.data.mqar.layout = "lm";  // false needs the lm layout
    std::string text = canonical_json(c);
    EXPECT_NE(text, base_text) << f.key;
    EXPECT_TRUE(hashes.insert(hash8(text)).second) << f.key << ": hash not unique";
    // Reading the written config back gives the same config, from JSON and from YAML.
    RunConfig back = load_run_config_json(text, "config.json");
    EXPECT_EQ(canonical_json(back), text) << f.key;
    EXPECT_EQ(canonical_json(load_run_config_yaml(canonical_yaml(c), "config.yaml")), text)
        << f.key;
  }
  RunConfig cuda = base;
  cuda.device = "cuda";
  cuda.train.dtype = "bf16";
  EXPECT_TRUE(hashes.insert(hash8(canonical_json(cuda))).second);
}

// What Python makes of a canonical text: "same <hash8>" when json.dumps(json.loads(text),
// sort_keys=True, indent=2) + "\n" reproduces it byte for byte, with the FNV-1a hash computed
// there; "differs" otherwise.
std::string python_view(const std::string& text) {
  testing::TempDir dir;
  std::string in = dir.write("config.json", text), out = dir.path("out.txt");
  std::string script =
      "import json, sys\n"
      "t = open(sys.argv[1], 'rb').read()\n"
      "h = 0xcbf29ce484222325\n"
      "for b in t: h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff\n"
      "same = json.dumps(json.loads(t), sort_keys=True, indent=2) + '\\n' == t.decode()\n"
      "print(('same %08x' % (h >> 32)) if same else 'differs')\n";
  std::string py = dir.write("check.py", script);
  std::string cmd = std::string(AMOR_PYTHON) + " " + py + " " + in + " > " + out;
  if (std::system(cmd.c_str()) != 0) return "python failed";
  std::string line;
  std::getline(std::ifstream(out), line);
  return line;
}

TEST(ConfigCanonical, IsWhatPythonJsonDumpsWrites) {
  RunConfig c = resolved_defaults();
  EXPECT_EQ(python_view(canonical_json(c)), "same " + hash8(canonical_json(c)));
  c.eval.tasks = {"lambada", "ünï", "emoji \xF0\x9F\x98\x80", "ctl \x01\x7f\t\"\\"};
  c.data.path = "/data/\xE4\xB8\xAD\xE6\x96\x87";
  c.train.lr = 0.1 + 0.2;
  c.model.rope_base = 5e5;
  c.model.amor.m_init = -1.25e-300;  // a key that may be negative
  c.train.eps = 1e16;
  std::string text = canonical_json(c);
  EXPECT_NE(text.find("\"emoji \\ud83d\\ude00\""), std::string::npos) << text;
  EXPECT_EQ(python_view(text), "same " + hash8(text));
}

TEST(ConfigCanonical, AwkwardValuesRoundTrip) {
  RunConfig c = resolved_defaults();
  c.data.path = "dir with space/\"quoted\"\\back\tslash: #x \x7f";
  c.eval.tasks = {"a b", "", "ünïcode", "\xF0\x9F\x98\x80 and \\ud83d"};
  c.train.lr = 0.1 + 0.2;
  c.model.amor.m_init = -1.25e-300;  // a key that may be negative
  c.checkpoint.signal = "";
  std::string text = canonical_json(c);
  EXPECT_EQ(canonical_json(load_run_config_json(text)), text);
  EXPECT_EQ(canonical_json(load_run_config_yaml(canonical_yaml(c))), text);
}

}  // namespace
}  // namespace amor::config
