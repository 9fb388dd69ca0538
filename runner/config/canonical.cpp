// Canonical JSON/YAML of a RunConfig, FNV-1a hashing, and loading a config back (canonical.h).
#include "runner/config/canonical.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <utility>
#include <vector>

#include "data/json/json.h"
#include "runner/config/assignments.h"
#include "runner/config/schema.h"

namespace amor::config {
namespace {

// The config as a tree of sections (std::map: sorted keys) with values at the leaves.
struct Tree {
  std::map<std::string, Tree> children;
  const Field* field = nullptr;
};

Tree build_tree() {
  Tree root;
  for (const Field& f : fields()) {
    Tree* t = &root;
    size_t start = 0;
    for (size_t dot; (dot = f.key.find('.', start)) != std::string::npos; start = dot + 1)
      t = &t->children[f.key.substr(start, dot - start)];
    t->children[f.key.substr(start)].field = &f;
  }
  return root;
}

const Tree& tree() {
  static const Tree t = build_tree();
  return t;
}

// A JSON string literal as Python's json.dumps writes it (ensure_ascii): printable ASCII as is,
// the short escapes, everything else \uXXXX (UTF-16, surrogate pairs above U+FFFF). A byte that
// is not valid UTF-8 is written as the code point of the same value. With `raw_unicode` (YAML
// output, for humans) valid UTF-8 from U+00A0 up stays as it is.
std::string python_quote(std::string_view s, bool raw_unicode = false) {
  std::string out = "\"";
  auto u16 = [&](uint32_t unit) { out += fmt::format("\\u{:04x}", unit); };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else {
      int len = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      uint32_t cp = len == 1 ? c : c & (0x7f >> len);
      bool valid = len > 1 && i + len <= s.size();
      for (int k = 1; valid && k < len; ++k) {
        unsigned char cont = s[i + k];
        valid = (cont & 0xc0) == 0x80;
        cp = (cp << 6) | (cont & 0x3f);
      }
      if (!valid) len = 1, cp = c;
      if (raw_unicode && valid && cp >= 0xa0) {
        out += s.substr(i, len);
      } else if (cp >= 0x10000) {
        cp -= 0x10000;
        u16(0xd800 + (cp >> 10));
        u16(0xdc00 + (cp & 0x3ff));
      } else {
        u16(cp);
      }
      i += len;
      continue;
    }
    ++i;
  }
  return out + "\"";
}

// A key declared omitted_at_default (models/core/config_keys.h) that holds its default: left out
// of the canonical text, so that adding such a key keeps the hash of every run that does not set it.
bool omitted(const Tree& t, const RunConfig& c) {
  static const RunConfig defaults;
  return t.field && t.field->allowed.omit_at_default && t.field->get(c) == t.field->get(defaults);
}

// Exactly Python's json.dumps(config, sort_keys=True, indent=2): lists one item per line.
std::string json_leaf(const FieldValue& v, int depth) {
  if (const auto* str = std::get_if<std::string>(&v)) return python_quote(*str);
  if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
    if (list->empty()) return "[]";
    std::string pad(2 * (depth + 2), ' '), out = "[\n";
    for (size_t i = 0; i < list->size(); ++i)
      out += pad + python_quote((*list)[i]) + (i + 1 < list->size() ? ",\n" : "\n");
    return out + std::string(2 * (depth + 1), ' ') + "]";
  }
  auto numbers = [&](const auto& list) {
    if (list.empty()) return std::string("[]");
    std::string pad(2 * (depth + 2), ' '), out = "[\n";
    for (size_t i = 0; i < list.size(); ++i)
      out += pad + format_value(FieldValue(list[i])) + (i + 1 < list.size() ? ",\n" : "\n");
    return out + std::string(2 * (depth + 1), ' ') + "]";
  };
  if (const auto* list = std::get_if<std::vector<int64_t>>(&v)) return numbers(*list);
  if (const auto* list = std::get_if<std::vector<double>>(&v)) return numbers(*list);
  return format_value(v);
}

void write_json(const Tree& t, const RunConfig& c, int depth, std::string& out) {
  std::string pad(2 * (depth + 1), ' ');
  out += "{\n";
  std::vector<std::pair<const std::string*, const Tree*>> shown;
  for (const auto& [name, child] : t.children)
    if (!omitted(child, c)) shown.emplace_back(&name, &child);
  size_t i = 0;
  for (const auto& [name_p, child_p] : shown) {
    const std::string& name = *name_p;
    const Tree& child = *child_p;
    out += pad + python_quote(name) + ": ";
    if (child.field) {
      out += json_leaf(child.field->get(c), depth);
    } else {
      write_json(child, c, depth + 1, out);
    }
    out += ++i < shown.size() ? ",\n" : "\n";
  }
  out += std::string(2 * depth, ' ') + "}";
}

// yaml-cpp rejects \u escapes of UTF-16 surrogates, which JSON uses above U+FFFF: rewrite each
// escaped surrogate pair inside strings as its UTF-8 bytes before the YAML reader sees the text.
std::string join_surrogates(std::string_view text) {
  std::string out;
  bool in_string = false;
  auto hex4 = [&](size_t at, uint32_t& v) {
    if (at + 6 > text.size() || text[at] != '\\' || text[at + 1] != 'u') return false;
    v = 0;
    for (size_t k = at + 2; k < at + 6; ++k) {
      char h = text[k];
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                             : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + d;
    }
    return true;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (!in_string) {
      in_string = ch == '"';
      out += ch;
      continue;
    }
    if (ch == '"') {
      in_string = false;
      out += ch;
    } else if (ch != '\\') {
      out += ch;
    } else {
      uint32_t hi, lo;
      if (hex4(i, hi) && hi >= 0xd800 && hi < 0xdc00 && hex4(i + 6, lo) && lo >= 0xdc00 &&
          lo < 0xe000) {
        uint32_t cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
        i += 11;
      } else if (i + 1 < text.size()) {
        out += ch;  // any other escape passes through whole
        out += text[++i];
      } else {
        out += ch;
      }
    }
  }
  return out;
}

void write_yaml(const Tree& t, const RunConfig& c, int depth, std::string& out) {
  std::string pad(2 * depth, ' ');
  for (const auto& [name, child] : t.children) {
    if (omitted(child, c)) continue;  // the same content as the JSON
    if (!child.field) {
      out += pad + name + ":\n";
      write_yaml(child, c, depth + 1, out);
      continue;
    }
    // Double-quoted strings and flow lists: valid YAML whatever the text holds.
    FieldValue v = child.field->get(c);
    std::string text;
    if (const auto* str = std::get_if<std::string>(&v)) {
      text = python_quote(*str, true);
    } else if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
      for (const std::string& item : *list) text += (text.empty() ? "" : ", ") + python_quote(item, true);
      text = "[" + text + "]";
    } else {
      text = format_value(v);
    }
    out += pad + name + ": " + text + "\n";
  }
}

RunConfig load(std::string_view text, const std::string& source) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    fail({source, e.mark.line + 1}, "not valid YAML/JSON: " + e.msg);
  }
  if (!doc.IsMap())
    fail({source, 0}, "expected a mapping of run config keys, got " + describe_node(doc));
  RunConfig c;
  KeyLocations set_at;
  apply(c, read_config_map(doc, source), set_at);
  finalize(c, set_at, {source, 0});
  return c;
}

}  // namespace

std::string canonical_json(const RunConfig& c) {
  std::string out;
  write_json(tree(), c, 0, out);
  return out + "\n";
}

std::string canonical_yaml(const RunConfig& c) {
  std::string out;
  write_yaml(tree(), c, 0, out);
  return out;
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hash8(std::string_view text) {
  return fmt::format("{:08x}", static_cast<uint32_t>(fnv1a64(text) >> 32));
}

RunConfig load_run_config_json(std::string_view text, const std::string& source) {
  // Strict JSON first (its errors give line and column); the YAML reader then types the keys.
  try {
    amor::json::parse(text, source);
  } catch (const amor::Error& e) {
    throw ConfigError(e.what());
  }
  return load(join_surrogates(text), source);
}

RunConfig load_run_config_yaml(std::string_view text, const std::string& source) {
  return load(text, source);
}

}  // namespace amor::config
