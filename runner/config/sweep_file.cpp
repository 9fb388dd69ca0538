// Reading and validating sweep files with their includes (see sweep_file.h).
#include "runner/config/sweep_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

namespace amor::config {
namespace {

namespace fs = std::filesystem;

// Sweep names name a folder; file systems hold 255 bytes per name.
constexpr size_t kMaxSweepNameBytes = 200;

// `context` "" = the file named on the command line (the message's location already names it).
std::string read_text(const std::string& path, const Location& from, const std::string& context) {
  std::string what = context.empty() ? "cannot read the file" : context + "cannot read " + path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(from, what + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(from, what + ": " + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One document per file: a second one (after `---`) would otherwise be dropped without a word.
YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.empty()) return YAML::Node();
    if (docs.size() > 1) {
      // The line of the `---` that starts it (the last one at or above its first node).
      int mark = docs[1].Mark().line, line = mark;
      int n = 0;
      for (size_t at = 0; at < text.size() && (mark < 0 || n <= mark); ++n) {
        size_t end = std::min(text.find('\n', at), text.size());
        std::string_view l(text.data() + at, end - at);
        if (l.substr(0, 3) == "---" &&
            (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r'))
          line = n;
        at = end + 1;
      }
      fail({file, line + 1},
           "a second YAML document (after `---`): a file holds one; put the other in a file of "
           "its own");
    }
    return docs[0];
  } catch (const YAML::ParserException& e) {
    fail({file, e.mark.line + 1}, fmt::format("YAML syntax error at column {}: {}",
                                              e.mark.column + 1, e.msg));
  }
}

Location key_location(const std::string& file, const YAML::Node& key) {
  return {file, key.Mark().line >= 0 ? key.Mark().line + 1 : 0};
}

std::string unknown(const std::string& key, const std::vector<std::string>& allowed) {
  std::string hint = suggest_key(key, allowed);
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return "unknown key '" + key + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
         "; allowed here: " + list;
}

// Reads a file's top-level mapping into key -> (value, key location), rejecting keys outside
// `allowed` and keys given twice.
struct TopLevel {
  std::map<std::string, std::pair<YAML::Node, Location>> keys;
  const YAML::Node* find(const std::string& k) const {
    auto it = keys.find(k);
    return it == keys.end() ? nullptr : &it->second.first;
  }
  Location at(const std::string& k) const { return keys.at(k).second; }
};

TopLevel top_level(const YAML::Node& doc, const std::string& file,
                   const std::vector<std::string>& allowed, const std::string& what) {
  if (!doc.IsDefined() || doc.IsNull()) fail({file, 0}, "empty file (expected " + what + ")");
  if (!doc.IsMap())
    fail({file, doc.Mark().line + 1}, "expected " + what + ", got " + describe_node(doc));
  TopLevel t;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    Location at = key_location(file, it->first);
    if (!it->first.IsScalar()) fail(at, "expected a key name, got " + describe_node(it->first));
    const std::string k = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      if (k == "name" || k == "sweep")
        fail(at, "key '" + k + "' is not allowed in an included file (only " +
                     "include, base, description)");
      fail(at, unknown(k, allowed));
    }
    auto [old, fresh] = t.keys.emplace(k, std::make_pair(it->second, at));
    if (!fresh) fail(at, "key '" + k + "' is set twice (first at " + old->second.second.str() + ")");
  }
  return t;
}

// Collects base assignments of a file and, depth-first, of the files it includes.
class BaseLoader {
 public:
  void file(const TopLevel& t, const std::string& display) {
    stack_.push_back({canonical(display), display});
    if (const YAML::Node* inc = t.find("include")) includes(*inc, t.at("include"), display);
    if (const YAML::Node* base = t.find("base")) {
      Location at = value_location(*base, t.at("base"));
      if (base->IsMap()) {
        auto a = read_config_map(*base, display);
        base_.insert(base_.end(), a.begin(), a.end());
      } else if (!base->IsNull()) {
        fail(at, "key 'base': expected a mapping of run config keys, got " + describe_node(*base));
      }
    }
    if (const YAML::Node* d = t.find("description"); d && !d->IsNull() && !d->IsScalar())
      fail(value_location(*d, t.at("description")),
           "key 'description': expected a string, got " + describe_node(*d));
    stack_.pop_back();
  }

  std::vector<Assignment> take() { return std::move(base_); }

 private:
  static fs::path canonical(const std::string& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? fs::path(p).lexically_normal() : c;
  }

  void includes(const YAML::Node& node, const Location& key_at, const std::string& display) {
    std::vector<YAML::Node> items;
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) items.push_back(node[i]);
    } else if (node.IsScalar()) {
      items.push_back(node);  // a single path
    } else if (!node.IsNull()) {
      fail(value_location(node, key_at),
           "key 'include': expected a list of file paths, got " + describe_node(node));
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const YAML::Node& item = items[i];
      Location at = value_location(item, key_at);
      if (!item.IsScalar() || item.Scalar().empty())
        fail(at, fmt::format("key 'include': item {}: expected a file path, got {}", i + 1,
                             describe_node(item)));
      const std::string& rel = item.Scalar();
      std::string path = fs::path(rel).is_absolute()
                             ? rel
                             : (fs::path(display).parent_path() / rel).lexically_normal().string();
      std::string context = "include '" + rel + "': ";
      fs::path canon = canonical(path);
      for (size_t s = 0; s < stack_.size(); ++s) {
        if (stack_[s].first != canon) continue;
        std::string chain;
        for (size_t j = s; j < stack_.size(); ++j) chain += stack_[j].second + " -> ";
        fail(at, context + "include cycle: " + chain + path);
      }
      std::string text = read_text(path, at, context);
      YAML::Node doc = parse_yaml(text, path);
      file(top_level(doc, path, {"description", "include", "base"},
                     "a mapping with include and base"),
           path);
    }
  }

  std::vector<std::pair<fs::path, std::string>> stack_;  // canonical, as displayed
  std::vector<Assignment> base_;
};

// unique_values: grid and seeds lists may not repeat a value; a zip list may (zip: {model.kind:
// [amor, amor], model.amor.backbone: [gdn, mamba2]}), as long as the zipped tuples differ.
AxisKey read_axis_key(const Field& f, const YAML::Node& v, const Location& key_at,
                      const std::string& section, bool unique_values = true) {
  std::string context = section + ": ";
  Location at = value_location(v, key_at);
  std::string key = "key '" + f.key + "': ";
  if (!v.IsSequence())
    fail(at, context + key + "expected a list of values to sweep, got " + describe_node(v));
  if (v.size() == 0)
    fail(at, context + key + "empty list (a swept key needs at least one value)");
  AxisKey a;
  a.field = &f;
  a.key_at = key_at;
  for (size_t i = 0; i < v.size(); ++i) {
    Location item_at = value_location(v[i], at);
    FieldValue value = parse_value(f, v[i], item_at, context);
    for (size_t j = 0; unique_values && j < a.values.size(); ++j)
      if (a.values[j] == value)
        fail(item_at, context + key + "value " + format_value(value) + " appears twice (first at " +
                          a.value_at[j].str() + ")");
    a.values.push_back(std::move(value));
    a.value_at.push_back(item_at);
  }
  return a;
}

class AxisReader {
 public:
  explicit AxisReader(std::string file) : file_(std::move(file)) {}

  // grid: one axis per key; zip: one axis holding every key.
  std::vector<Axis> keyed(const YAML::Node& node, const Location& key_at,
                          const std::string& section, bool zipped) {
    Location at = value_location(node, key_at);
    if (!node.IsMap())
      fail(at, "key '" + section + "': expected a mapping of keys to lists of values, got " +
                   describe_node(node));
    if (node.size() == 0)
      fail(at, "key '" + section + "': empty sweep (give at least one key with a list of values)");
    std::vector<AxisKey> keys;
    walk_config(node, "", file_, section + ": ",
                [&](const Field& f, const YAML::Node& v, const Location& k_at) {
                  claim(f.key, section, k_at);
                  keys.push_back(read_axis_key(f, v, k_at, section, /*unique_values=*/!zipped));
                });
    std::vector<Axis> axes;
    if (!zipped) {
      for (AxisKey& k : keys) axes.push_back({section, {std::move(k)}, {}});
      return axes;
    }
    for (const AxisKey& k : keys)
      if (k.values.size() != keys.front().values.size())
        fail(k.key_at, fmt::format("{}: key '{}' has {} values but '{}' ({}) has {}; zipped lists "
                                   "need equal lengths",
                                   section, k.field->key, k.values.size(),
                                   keys.front().field->key, keys.front().key_at.str(),
                                   keys.front().values.size()));
    for (size_t i = 0; i < keys.front().values.size(); ++i)
      for (size_t j = 0; j < i; ++j) {
        bool same = true;
        for (const AxisKey& k : keys) same = same && k.values[i] == k.values[j];
        if (same)
          fail(keys.front().value_at[i],
               fmt::format("{}: entry {} repeats entry {} (the same value for every zipped key)",
                           section, i + 1, j + 1));
      }
    axes.push_back({section, std::move(keys), {}});
    return axes;
  }

  // sweep.variants: a list of override sets; `name` (optional) names the item's runs.
  Axis variants(const YAML::Node& node, const Location& key_at) {
    const std::string section = "sweep.variants";
    Location at = value_location(node, key_at);
    if (!node.IsSequence())
      fail(at, "key '" + section + "': expected a list of override sets ({key: value, ...}), got " +
                   describe_node(node));
    if (node.size() == 0)
      fail(at, "key '" + section + "': empty list (give at least one override set)");
    Axis axis{section, {}, {}};
    std::map<std::string, Location> names;
    std::vector<std::vector<std::pair<std::string, std::string>>> sets;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      Location item_at = value_location(item, at);
      std::string context = fmt::format("{} item {}: ", section, i + 1);
      if (!item.IsMap() && !item.IsNull())
        fail(item_at, context + "expected a mapping of run config keys to values (and an optional "
                                "name), got " + describe_node(item));
      Variant v;
      v.at = item_at;
      std::map<std::string, Location> seen;
      if (item.IsMap())
        for (auto it = item.begin(); it != item.end(); ++it) {
          const YAML::Node k = it->first;
          const YAML::Node val = it->second;
          Location k_at = key_location(file_, k);
          if (k.IsScalar() && k.Scalar() == "name") {
            Location v_at = value_location(val, k_at);
            if (!val.IsScalar() || val.Scalar().empty() ||
                val.Scalar().find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                               "0123456789_.+-") != std::string::npos ||
                val.Scalar()[0] == '.' || val.Scalar().size() > 100)
              fail(v_at, context + "key 'name': expected a run name part of letters, digits, '_', "
                                   "'.', '+', '-' (at most 100 bytes, not starting with '.'), got " +
                             describe_node(val));
            v.name = val.Scalar();
            auto [old, fresh] = names.emplace(v.name, v_at);
            if (!fresh)
              fail(v_at, context + "name '" + v.name + "' is already used (at " + old->second.str() +
                             ")");
            continue;
          }
          YAML::Node one(YAML::NodeType::Map);
          one.force_insert(k, val);
          for (Assignment& a : read_config_map(one, file_, context)) {
            auto [old, fresh] = seen.emplace(a.field->key, a.where);
            if (!fresh)
              fail(a.where, context + "key '" + a.field->key + "' is set twice (first at " +
                                old->second.str() + ")");
            claim(a.field->key, section, k_at);
            v.set.push_back(std::move(a));
          }
        }
      // Two items that set the same keys to the same values would be one run under two names.
      std::vector<std::pair<std::string, std::string>> set;
      for (const Assignment& a : v.set) set.emplace_back(a.field->key, format_value(a.value));
      std::sort(set.begin(), set.end());
      for (size_t j = 0; j < sets.size(); ++j)
        if (sets[j] == set)
          fail(item_at, fmt::format("{}repeats item {} (the same keys set to the same values)",
                                    context, j + 1));
      sets.push_back(std::move(set));
      axis.variants.push_back(std::move(v));
    }
    return axis;
  }

  Axis seeds(const YAML::Node& node, const Location& key_at) {
    const Field& f = *find_field("train.seed");
    claim(f.key, "sweep.seeds", key_at);
    return {"sweep.seeds", {read_axis_key(f, node, key_at, "sweep.seeds")}, {}};
  }

 private:
  // A key may be swept by only one of grid, zip and seeds, and once.
  // Variants may each set a key (once per item); no other section may then sweep it.
  void claim(const std::string& key, const std::string& section, const Location& at) {
    auto [it, fresh] = claimed_.emplace(key, std::make_pair(section, at));
    if (fresh) return;
    if (section == "sweep.variants" && it->second.first == section) return;
    if (it->second.first == section)
      fail(at, section + ": key '" + key + "' is set twice (first at " + it->second.second.str() +
                   ")");
    fail(at, section + ": key '" + key + "' is already swept in " + it->second.first + " (" +
                 it->second.second.str() + ")");
  }

  std::string file_;
  std::map<std::string, std::pair<std::string, Location>> claimed_;
};

std::vector<Axis> read_sweep(const YAML::Node& node, const Location& key_at,
                             const std::string& file) {
  Location at = value_location(node, key_at);
  const std::string empty =
      "key 'sweep': empty sweep (give variants, grid, zip or seeds, or leave out `sweep` for a "
      "single run)";
  if (node.IsNull() || (node.IsMap() && node.size() == 0)) fail(at, empty);
  if (!node.IsMap())
    fail(at, "key 'sweep': expected a mapping with variants, grid, zip, seeds; got " + describe_node(node));
  std::map<std::string, std::pair<YAML::Node, Location>> parts;
  for (auto it = node.begin(); it != node.end(); ++it) {
    Location k_at = key_location(file, it->first);
    std::string k = it->first.IsScalar() ? it->first.Scalar() : "";
    if (k != "grid" && k != "zip" && k != "seeds" && k != "variants")
      fail(k_at, unknown("sweep." + k, {"sweep.grid", "sweep.zip", "sweep.seeds", "sweep.variants"}));
    auto [old, fresh] = parts.emplace(k, std::make_pair(it->second, k_at));
    if (!fresh)
      fail(k_at, "key 'sweep." + k + "' is set twice (first at " + old->second.second.str() + ")");
  }
  AxisReader reader(file);
  std::vector<Axis> axes;
  // Variants first: the slowest axis, and the first part of the run names (usually the model).
  if (auto it = parts.find("variants"); it != parts.end())
    axes.push_back(reader.variants(it->second.first, it->second.second));
  for (const char* part : {"grid", "zip"}) {
    auto it = parts.find(part);
    if (it == parts.end()) continue;
    auto more = reader.keyed(it->second.first, it->second.second, std::string("sweep.") + part,
                             std::string(part) == "zip");
    axes.insert(axes.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  }
  if (auto it = parts.find("seeds"); it != parts.end())
    axes.push_back(reader.seeds(it->second.first, it->second.second));
  return axes;
}

}  // namespace

SweepDef read_sweep_file(const std::string& path) {
  std::string text = read_text(path, {path, 0}, "");
  YAML::Node doc = parse_yaml(text, path);
  TopLevel t = top_level(doc, path, {"name", "description", "include", "base", "sweep"},
                         "a mapping with name, include, base, sweep");

  SweepDef def;
  def.file = path;
  const YAML::Node* name = t.find("name");
  if (!name) fail({path, 0}, "key 'name' is missing (every sweep file needs a name)");
  def.name_at = value_location(*name, t.at("name"));
  // The name is a folder's name (<output>/<sweep>/): past 255 bytes the file system refuses it.
  if (name->IsScalar() && name->Scalar().size() > kMaxSweepNameBytes)
    fail(def.name_at, fmt::format("key 'name': a sweep name is at most {} bytes (it names the "
                                  "sweep's folder), got {} bytes",
                                  kMaxSweepNameBytes, name->Scalar().size()));
  // Checked without std::regex, which recursed per character and overflowed the stack.
  if (!name->IsScalar() || name->Scalar().empty() ||
      name->Scalar().find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_.-") != std::string::npos ||
      name->Scalar().find_first_not_of('.') == std::string::npos)
    fail(def.name_at, "key 'name': expected a sweep name of letters, digits, '_', '.', '-', got " +
                          describe_node(*name));
  def.name = name->Scalar();

  BaseLoader loader;
  loader.file(t, path);
  def.base = loader.take();
  if (const YAML::Node* sweep = t.find("sweep")) def.axes = read_sweep(*sweep, t.at("sweep"), path);
  return def;
}

}  // namespace amor::config
