// Loading a Hugging Face tokenizer.json (and BOS/EOS from a tokenizer_config.json beside it) into
// a BpeTokenizer::Spec. Every unsupported or malformed field is an error naming the file and key.
#include <filesystem>

#include "data/json/json.h"
#include "data/tokenizer/bpe_tokenizer.h"
#include "kernels/core/error.h"

namespace amor {

namespace {

using json::Value;

const char* kind_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::Bool:
      return "a boolean";
    case Value::Kind::Number:
      return "a number";
    case Value::Kind::String:
      return "a string";
    case Value::Kind::Array:
      return "an array";
    case Value::Kind::Object:
      return "an object";
  }
  return "?";
}

// Typed access with errors of the form "<file>: key 'model.vocab': expected an object, got null".
struct Fields {
  const std::string& file;

  [[noreturn]] void wrong(const Value& v, const std::string& key, const char* expected) const {
    throw Error(
        fmt::format("{}: key '{}': expected {}, got {}", file, key, expected, kind_name(v)));
  }
  const Value& at(const Value& obj, const std::string& key, const std::string& where) const {
    const Value* v = obj.find(key);
    AMOR_CHECK(v != nullptr, "{}: key '{}' is missing", file,
               where.empty() ? key : where + "." + key);
    return *v;
  }
  const std::string& str(const Value& v, const std::string& key) const {
    if (!v.is_string()) wrong(v, key, "a string");
    return v.as_string();
  }
  const json::Object& obj(const Value& v, const std::string& key) const {
    if (!v.is_object()) wrong(v, key, "an object");
    return v.as_object();
  }
  const json::Array& arr(const Value& v, const std::string& key) const {
    if (!v.is_array()) wrong(v, key, "an array");
    return v.as_array();
  }
  int32_t id(const Value& v, const std::string& key) const {
    if (!v.is_number()) wrong(v, key, "an integer id");
    const double d = v.as_double();
    AMOR_CHECK(d >= 0 && d < 2147483647.0 && d == static_cast<double>(static_cast<int64_t>(d)),
               "{}: key '{}': expected a non-negative integer id, got {}", file, key, d);
    return static_cast<int32_t>(d);
  }
  bool flag(const Value& obj, const std::string& key, const std::string& where,
            bool fallback) const {
    const Value* v = obj.find(key);
    if (v == nullptr || v->is_null()) return fallback;
    if (v->kind() != Value::Kind::Bool) wrong(*v, where + "." + key, "a boolean");
    return v->as_bool();
  }
};

std::string escape_regex(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

void add_pre_tokenizer(const Fields& f, const Value& pt, const std::string& where,
                       tokenizer::PreTokenizer& out, bool& byte_level) {
  f.obj(pt, where);
  const std::string& type = f.str(f.at(pt, "type", where), where + ".type");
  if (type == "Sequence") {
    const std::string key = where + ".pretokenizers";
    const auto& steps = f.arr(f.at(pt, "pretokenizers", where), key);
    for (size_t i = 0; i < steps.size(); ++i)
      add_pre_tokenizer(f, steps[i], fmt::format("{}[{}]", key, i), out, byte_level);
  } else if (type == "ByteLevel") {
    // A missing add_prefix_space reads as false, as transformers.js reads it.
    out.add_byte_level(f.flag(pt, "add_prefix_space", where, false),
                       f.flag(pt, "use_regex", where, true));
    byte_level = true;
  } else if (type == "Split") {
    const Value& pattern = f.at(pt, "pattern", where);
    f.obj(pattern, where + ".pattern");
    std::string regex, key;
    if (const Value* r = pattern.find("Regex")) {
      key = where + ".pattern.Regex";
      regex = f.str(*r, key);
    } else if (const Value* s = pattern.find("String")) {
      key = where + ".pattern.String";
      regex = escape_regex(f.str(*s, key));
    } else {
      throw Error(
          fmt::format("{}: key '{}.pattern' has neither 'Regex' nor 'String'", f.file, where));
    }
    const std::string& behavior = f.str(f.at(pt, "behavior", where), where + ".behavior");
    AMOR_CHECK(behavior == "Isolated",
               "{}: key '{}.behavior' is '{}'; only 'Isolated' Split pre-tokenizers are supported",
               f.file, where, behavior);
    AMOR_CHECK(!f.flag(pt, "invert", where, false),
               "{}: key '{}.invert' is true; inverted Split pre-tokenizers are not supported",
               f.file, where);
    out.add_split(std::make_shared<const tokenizer::Regex>(regex, f.file + ": key '" + key + "'"));
  } else {
    throw Error(fmt::format(
        "{}: key '{}.type' is '{}'; supported pre-tokenizers: ByteLevel, Split, Sequence", f.file,
        where, type));
  }
}

// The text of a tokenizer_config.json token entry: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> config_token(const Fields& f, const Value& cfg, const std::string& key) {
  const Value* v = cfg.find(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->as_string();
  if (v->is_object()) return f.str(f.at(*v, "content", key), key + ".content");
  f.wrong(*v, key, "a string or an object with 'content'");
}

// BOS/EOS from a TemplateProcessing post-processor: its single template's special tokens before
// and after the sequence.
void template_bos_eos(const Fields& f, const Value& pp, const std::string& where,
                      BpeTokenizer::Spec& spec) {
  if (!pp.is_object()) return;
  const Value* type = pp.find("type");
  if (type == nullptr || !type->is_string()) return;
  if (type->as_string() == "Sequence") {
    if (const Value* procs = pp.find("processors"); procs && procs->is_array())
      for (size_t i = 0; i < procs->as_array().size(); ++i)
        template_bos_eos(f, procs->as_array()[i], fmt::format("{}.processors[{}]", where, i), spec);
    return;
  }
  if (type->as_string() != "TemplateProcessing") return;
  const std::string key = where + ".single";
  const auto& single = f.arr(f.at(pp, "single", where), key);
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const Value& item = single[i];
    if (item.find("Sequence")) {
      seen_sequence = true;
    } else if (const Value* st = item.find("SpecialToken")) {
      const std::string item = fmt::format("{}[{}].SpecialToken", key, i);
      const std::string item_key = item + ".id";
      const std::string& tok = f.str(f.at(*st, "id", item), item_key);
      (seen_sequence ? spec.eos_token : spec.bos_token) = tok;
      (seen_sequence ? spec.eos_where : spec.bos_where) = "key '" + item_key + "'";
    }
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_tokenizer_json(const std::string& path,
                                                                const std::string& name) {
  std::error_code ec;
  AMOR_CHECK(std::filesystem::is_regular_file(path, ec),
             "{}: no such tokenizer.json file (tokenizer '{}')", path, name);
  const Value root = json::parse_file(path);
  const Fields f{path};
  f.obj(root, "<top level>");
  Spec spec;
  spec.name = name;
  spec.source = path;

  const Value& model = f.at(root, "model", "");
  f.obj(model, "model");
  const Value* type = model.find("type");
  const std::string model_type = type ? f.str(*type, "model.type") : "BPE";
  AMOR_CHECK(model_type == "BPE",
             "{}: key 'model.type' is '{}'; only byte-level BPE tokenizers are supported", path,
             model_type);
  if (const Value* d = model.find("dropout"); d && !d->is_null())
    AMOR_CHECK(d->is_number() && d->as_double() == 0.0,
               "{}: key 'model.dropout': BPE dropout is not supported", path);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const Value* v = model.find(key); v && !v->is_null())
      AMOR_CHECK(v->is_string() && v->as_string().empty(),
                 "{}: key 'model.{}' is set; byte-level BPE has no subword affixes", path, key);
  spec.ignore_merges = f.flag(model, "ignore_merges", "model", false);

  for (const auto& [tok, id] : f.obj(f.at(model, "vocab", "model"), "model.vocab"))
    spec.vocab.emplace_back(tok, f.id(id, "model.vocab." + tok));

  const auto& merges = f.arr(f.at(model, "merges", "model"), "model.merges");
  spec.merges.reserve(merges.size());
  spec.merge_where.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string where = fmt::format("key 'model.merges[{}]'", i);
    const Value& m = merges[i];
    if (m.is_string()) {
      // Tokenizers < 0.20 write "a b"; byte-level tokens never hold a space.
      const std::string& s = m.as_string();
      const size_t sp = s.find(' ');
      AMOR_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
                     s.find(' ', sp + 1) == std::string::npos,
                 "{}: {} is '{}'; expected two tokens separated by one space", path, where, s);
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array()) {
      const auto& pair = m.as_array();
      AMOR_CHECK(pair.size() == 2 && pair[0].is_string() && pair[1].is_string(),
                 "{}: {} is {}; expected a pair of two token strings", path, where, m.dump());
      spec.merges.emplace_back(pair[0].as_string(), pair[1].as_string());
    } else {
      f.wrong(m, fmt::format("model.merges[{}]", i), "a string or a pair of strings");
    }
    spec.merge_where.push_back(std::move(where));
  }

  if (const Value* added = root.find("added_tokens"); added && !added->is_null()) {
    const auto& list = f.arr(*added, "added_tokens");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string key = fmt::format("added_tokens[{}]", i);
      f.obj(list[i], key);
      AddedToken a;
      a.id = f.id(f.at(list[i], "id", key), key + ".id");
      a.content = f.str(f.at(list[i], "content", key), key + ".content");
      a.special = f.flag(list[i], "special", key, false);
      a.lstrip = f.flag(list[i], "lstrip", key, false);
      a.rstrip = f.flag(list[i], "rstrip", key, false);
      AMOR_CHECK(!f.flag(list[i], "single_word", key, false),
                 "{}: key '{}.single_word' is true; single-word added tokens are not supported",
                 path, key);
      spec.added.push_back(std::move(a));
    }
  }

  if (const Value* n = root.find("normalizer"); n && !n->is_null()) {
    const Value* t = n->find("type");
    throw Error(
        fmt::format("{}: key 'normalizer' is {}; normalizers are not supported (byte-level "
                    "BPE reads the text as it is)",
                    path, t && t->is_string() ? "'" + t->as_string() + "'" : n->dump()));
  }
  const Value* pt = root.find("pre_tokenizer");
  AMOR_CHECK(pt && !pt->is_null(),
             "{}: key 'pre_tokenizer' is missing or null; not a byte-level BPE tokenizer", path);
  bool byte_level = false;
  add_pre_tokenizer(f, *pt, "pre_tokenizer", spec.pre_tokenizer, byte_level);
  AMOR_CHECK(byte_level,
             "{}: key 'pre_tokenizer' has no ByteLevel step; not a byte-level BPE "
             "tokenizer",
             path);

  // BOS/EOS: the tokenizer_config.json that Hugging Face keeps beside tokenizer.json decides;
  // without one, a TemplateProcessing post-processor; then well-known names.
  const auto config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::is_regular_file(config, ec)) {
    const std::string cfg_path = config.string();
    const Value cfg = json::parse_file(cfg_path);
    const Fields cf{cfg_path};
    cf.obj(cfg, "<top level>");
    spec.bos_token = config_token(cf, cfg, "bos_token");
    spec.eos_token = config_token(cf, cfg, "eos_token");
    spec.bos_where = cfg_path + " key 'bos_token'";
    spec.eos_where = cfg_path + " key 'eos_token'";
  } else {
    if (const Value* pp = root.find("post_processor"))
      template_bos_eos(f, *pp, "post_processor", spec);
    auto well_known = [&](std::optional<std::string>& slot, std::string& where,
                          std::initializer_list<const char*> names) {
      if (slot) return;
      for (const char* n : names)
        for (const auto& a : spec.added)
          if (a.special && a.content == n) {
            slot = n;
            where = "special token";
            return;
          }
    };
    well_known(spec.bos_token, spec.bos_where,
               {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<|endoftext|>"});
    well_known(spec.eos_token, spec.eos_where, {"<|end_of_text|>", "</s>", "<|endoftext|>"});
  }
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace amor
