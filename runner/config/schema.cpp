// The schema table of RunConfig keys and YAML value typing (see schema.h).
#include "runner/config/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include "data/json/json.h"

namespace amor::config {
namespace {

using Check = std::function<std::string(const FieldValue&)>;
struct Choices {
  std::vector<std::string> values;
};

// Builds a Field from an accessor `[](auto& c) -> auto& { return c.x.y; }`; the member's C++ type
// decides the key's type.
template <class Acc>
Field make_field(std::string key, Acc acc, Check check = {}, Choices choices = {}) {
  using T = std::remove_cvref_t<decltype(acc(std::declval<RunConfig&>()))>;
  Field f;
  f.key = std::move(key);
  if constexpr (std::is_same_v<T, bool>) {
    f.type = FieldType::Bool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    f.type = FieldType::Int;
  } else if constexpr (std::is_same_v<T, double>) {
    f.type = FieldType::Float;
  } else if constexpr (std::is_same_v<T, std::string>) {
    f.type = choices.values.empty() ? FieldType::String : FieldType::Enum;
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    f.type = FieldType::IntList;
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    f.type = FieldType::FloatList;
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>, "unsupported config field type");
    f.type = FieldType::StringList;
  }
  f.choices = std::move(choices.values);
  f.get = [acc](const RunConfig& c) -> FieldValue { return FieldValue(acc(c)); };
  f.set = [acc](RunConfig& c, const FieldValue& v) { acc(c) = std::get<T>(v); };
  f.check = std::move(check);
  return f;
}

#define AMOR_KEY(key, member, ...) \
  make_field(key, [](auto& c) -> auto& { return c.member; } __VA_OPT__(, ) __VA_ARGS__)

Check at_least(int64_t lo) {
  return [lo](const FieldValue& v) {
    return std::get<int64_t>(v) < lo ? fmt::format("must be at least {}, got {}", lo,
                                                   std::get<int64_t>(v))
                                     : std::string();
  };
}

// A float interval; open ends are exclusive. Infinite bounds are left out of the message.
Check within(double lo, double hi, bool lo_open = false, bool hi_open = false) {
  return [=](const FieldValue& v) {
    double x = std::get<double>(v);
    bool ok = (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (ok) return std::string();
    if (std::isinf(hi))
      return fmt::format("must be {} {}, got {}", lo_open ? ">" : ">=", format_double(lo),
                         format_double(x));
    return fmt::format("must be in {}{}, {}{}, got {}", lo_open ? "(" : "[", format_double(lo),
                       format_double(hi), hi_open ? ")" : "]", format_double(x));
  };
}
constexpr double kInf = std::numeric_limits<double>::infinity();
Check positive() { return within(0.0, kInf, true); }
Check non_negative() { return within(0.0, kInf); }
Check unit_interval() { return within(0.0, 1.0); }
Check below_one() { return within(0.0, 1.0, false, true); }

Check all_at_least(int64_t lo) {
  return [lo](const FieldValue& v) {
    const auto& l = std::get<std::vector<int64_t>>(v);
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i] < lo) return fmt::format("item {}: must be at least {}, got {}", i + 1, lo, l[i]);
    return std::string();
  };
}

Check all_within(double lo, double hi) {
  return [=](const FieldValue& v) {
    const auto& l = std::get<std::vector<double>>(v);
    for (size_t i = 0; i < l.size(); ++i)
      if (!(l[i] >= lo && l[i] <= hi))
        return fmt::format("item {}: must be in [{}, {}], got {}", i + 1, format_double(lo),
                           format_double(hi), format_double(l[i]));
    return std::string();
  };
}

Check only_chars(std::string allowed) {
  return [allowed](const FieldValue& v) {
    for (char ch : std::get<std::string>(v))
      if (allowed.find(ch) == std::string::npos)
        return fmt::format("'{}' may only contain the letters {}", std::get<std::string>(v),
                           allowed);
    return std::string();
  };
}

std::vector<Field> build_fields() {
  std::vector<Field> f = {
      // model.*: amor::model::ModelConfig (models/core/config.h documents each).
      AMOR_KEY("model.kind", model.kind, {},
               Choices{{"transformer", "mamba2", "gdn", "serial", "fused", "amor", "oryx"}}),
      AMOR_KEY("model.preset", model.preset),
      AMOR_KEY("model.vocab", model.vocab, at_least(2)),
      AMOR_KEY("model.d_model", model.d_model, at_least(1)),
      AMOR_KEY("model.n_layers", model.n_layers, at_least(0)),
      AMOR_KEY("model.d_ff", model.d_ff, at_least(0)),
      AMOR_KEY("model.head_dim", model.head_dim, at_least(1)),
      AMOR_KEY("model.n_kv_heads", model.n_kv_heads, at_least(0)),
      AMOR_KEY("model.rope_base", model.rope_base, positive()),
      AMOR_KEY("model.norm_eps", model.norm_eps, positive()),
      AMOR_KEY("model.init_std", model.init_std, non_negative()),
      AMOR_KEY("model.pattern", model.pattern, only_chars("AMG")),
      AMOR_KEY("model.fused_linear", model.fused_linear, {}, Choices{{"mamba2", "gdn"}}),
      AMOR_KEY("model.vocab_chunk", model.vocab_chunk, at_least(1)),
      AMOR_KEY("model.recompute", model.recompute),
      AMOR_KEY("model.mamba2.d_state", model.mamba2.d_state, at_least(1)),
      AMOR_KEY("model.mamba2.expand", model.mamba2.expand, at_least(1)),
      AMOR_KEY("model.mamba2.head_dim", model.mamba2.head_dim, at_least(1)),
      AMOR_KEY("model.mamba2.n_groups", model.mamba2.n_groups, at_least(1)),
      AMOR_KEY("model.mamba2.conv_kernel", model.mamba2.conv_kernel, at_least(1)),
      AMOR_KEY("model.mamba2.chunk", model.mamba2.chunk, at_least(1)),
      AMOR_KEY("model.mamba2.dt_min", model.mamba2.dt_min, positive()),
      AMOR_KEY("model.mamba2.dt_max", model.mamba2.dt_max, positive()),
      AMOR_KEY("model.mamba2.dt_floor", model.mamba2.dt_floor, non_negative()),
      AMOR_KEY("model.mamba2.a_min", model.mamba2.a_min, non_negative()),
      AMOR_KEY("model.mamba2.a_max", model.mamba2.a_max, positive()),
      AMOR_KEY("model.gdn.head_dim", model.gdn.head_dim, at_least(1)),
      AMOR_KEY("model.gdn.qk_ratio", model.gdn.qk_ratio, positive()),
      AMOR_KEY("model.gdn.v_expand", model.gdn.v_expand, positive()),
      AMOR_KEY("model.gdn.conv_kernel", model.gdn.conv_kernel, at_least(1)),
      AMOR_KEY("model.gdn.chunk", model.gdn.chunk, at_least(1)),
      AMOR_KEY("model.gdn.norm_eps", model.gdn.norm_eps, positive()),
      AMOR_KEY("model.gdn.dt_min", model.gdn.dt_min, positive()),
      AMOR_KEY("model.gdn.dt_max", model.gdn.dt_max, positive()),
      AMOR_KEY("model.gdn.dt_floor", model.gdn.dt_floor, non_negative()),
      AMOR_KEY("model.gdn.a_min", model.gdn.a_min, non_negative()),
      AMOR_KEY("model.gdn.a_max", model.gdn.a_max, positive()),
      AMOR_KEY("model.amor.backbone", model.amor.backbone, {}, Choices{{"gdn", "mamba2"}}),
      AMOR_KEY("model.amor.blocks", model.amor.blocks, at_least(1)),
      AMOR_KEY("model.amor.residual_mode", model.amor.residual_mode, {},
               Choices{{"classic", "h"}}),
      AMOR_KEY("model.amor.offset_mode", model.amor.offset_mode, {},
               Choices{{"adaptive", "fixed"}}),
      AMOR_KEY("model.amor.kappa", model.amor.kappa, non_negative()),
      AMOR_KEY("model.amor.momentum", model.amor.momentum, unit_interval()),
      AMOR_KEY("model.amor.m_init", model.amor.m_init),
      AMOR_KEY("model.amor.s_init", model.amor.s_init, non_negative()),
      AMOR_KEY("model.amor.fixed_offset", model.amor.fixed_offset),
      AMOR_KEY("model.oryx.linear", model.oryx.linear, {}, Choices{{"gdn", "mamba2"}}),
      AMOR_KEY("model.oryx.chunk", model.oryx.chunk, at_least(1)),
      AMOR_KEY("model.oryx.p_attention", model.oryx.p_attention, unit_interval()),
      AMOR_KEY("model.oryx.schedule", model.oryx.schedule, {},
               Choices{{"attention", "linear", "prefill_linear_decode_attention", "segments"}}),
      // data.*
      AMOR_KEY("data.source", data.source, {}, Choices{{"corpus", "mqar", "shards"}}),
      AMOR_KEY("data.path", data.path),
      AMOR_KEY("data.tokenizer", data.tokenizer),
      AMOR_KEY("data.seq_len", data.seq_len, at_least(1)),
      AMOR_KEY("data.mqar.num_kv_pairs", data.mqar.num_kv_pairs, at_least(1)),
      AMOR_KEY("data.mqar.num_train", data.mqar.num_train, at_least(1)),
      AMOR_KEY("data.mqar.num_valid", data.mqar.num_valid, at_least(1)),
      AMOR_KEY("data.mqar.power_a", data.mqar.power_a, positive()),
      // train.*
      AMOR_KEY("train.steps", train.steps, at_least(0)),
      AMOR_KEY("train.micro_batch", train.micro_batch, at_least(1)),
      AMOR_KEY("train.grad_accum", train.grad_accum, at_least(1)),
      AMOR_KEY("train.lr", train.lr, non_negative()),
      AMOR_KEY("train.min_lr_ratio", train.min_lr_ratio, unit_interval()),
      AMOR_KEY("train.warmup_steps", train.warmup_steps, at_least(0)),
      AMOR_KEY("train.weight_decay", train.weight_decay, non_negative()),
      AMOR_KEY("train.beta1", train.beta1, below_one()),
      AMOR_KEY("train.beta2", train.beta2, below_one()),
      AMOR_KEY("train.eps", train.eps, positive()),
      AMOR_KEY("train.clip", train.clip, non_negative()),
      AMOR_KEY("train.seed", train.seed, at_least(0)),
      AMOR_KEY("train.dtype", train.dtype, {}, Choices{{"auto", "f32", "f64", "bf16"}}),
      AMOR_KEY("train.log_every", train.log_every, at_least(1)),
      AMOR_KEY("train.eval_every", train.eval_every, at_least(0)),
      // eval.*
      AMOR_KEY("eval.tasks", eval.tasks),
      AMOR_KEY("eval.max_examples", eval.max_examples, at_least(0)),
      AMOR_KEY("eval.tokens_per_task", eval.tokens_per_task, at_least(0)),
      AMOR_KEY("eval.max_length", eval.max_length, at_least(1)),
      AMOR_KEY("eval.batch_size", eval.batch_size, at_least(1)),
      AMOR_KEY("eval.seed", eval.seed, at_least(0)),
      AMOR_KEY("eval.weights", eval.weights),
      AMOR_KEY("eval.checkpoint", eval.checkpoint),
      AMOR_KEY("eval.lambada.path", eval.lambada.path),
      AMOR_KEY("eval.lambada.limit", eval.lambada.limit, at_least(0)),
      AMOR_KEY("eval.hellaswag.path", eval.hellaswag.path),
      AMOR_KEY("eval.hellaswag.limit", eval.hellaswag.limit, at_least(0)),
      AMOR_KEY("eval.piqa.path", eval.piqa.path),
      AMOR_KEY("eval.piqa.limit", eval.piqa.limit, at_least(0)),
      AMOR_KEY("eval.arc_easy.path", eval.arc_easy.path),
      AMOR_KEY("eval.arc_easy.limit", eval.arc_easy.limit, at_least(0)),
      AMOR_KEY("eval.arc_challenge.path", eval.arc_challenge.path),
      AMOR_KEY("eval.arc_challenge.limit", eval.arc_challenge.limit, at_least(0)),
      AMOR_KEY("eval.winogrande.path", eval.winogrande.path),
      AMOR_KEY("eval.winogrande.limit", eval.winogrande.limit, at_least(0)),
      AMOR_KEY("eval.longbench.dir", eval.longbench_dir),
      AMOR_KEY("eval.longbench.limit", eval.longbench_limit, at_least(0)),
      AMOR_KEY("eval.niah.lengths", eval.niah.lengths, all_at_least(1)),
      AMOR_KEY("eval.niah.depths", eval.niah.depths, all_within(0, 100)),
      AMOR_KEY("eval.niah.samples_per_cell", eval.niah.samples_per_cell, at_least(1)),
      AMOR_KEY("eval.niah.essay_path", eval.niah.essay_path),
      AMOR_KEY("eval.mqar.vocab_size", eval.mqar.vocab_size, at_least(0)),
      AMOR_KEY("eval.mqar.seq_len", eval.mqar.seq_len, at_least(0)),
      AMOR_KEY("eval.mqar.kv_pairs", eval.mqar.kv_pairs, at_least(0)),
      AMOR_KEY("eval.mqar.examples", eval.mqar.examples, at_least(1)),
      AMOR_KEY("eval.ppl_by_position.path", eval.ppl_by_position.path),
      AMOR_KEY("eval.ppl_by_position.seq_len", eval.ppl_by_position.seq_len, at_least(0)),
      AMOR_KEY("eval.ppl_by_position.bucket_size", eval.ppl_by_position.bucket_size, at_least(0)),
      AMOR_KEY("eval.ppl_by_position.num_sequences", eval.ppl_by_position.num_sequences, at_least(1)),
      AMOR_KEY("eval.oryx_switch.path", eval.oryx_switch.path),
      AMOR_KEY("eval.oryx_switch.seq_len", eval.oryx_switch.seq_len, at_least(0)),
      AMOR_KEY("eval.oryx_switch.switch_at", eval.oryx_switch.switch_at, at_least(0)),
      AMOR_KEY("eval.oryx_switch.window", eval.oryx_switch.window, at_least(0)),
      AMOR_KEY("eval.oryx_switch.before", eval.oryx_switch.before, {}, Choices{{"linear", "attention"}}),
      AMOR_KEY("eval.oryx_switch.after", eval.oryx_switch.after, {}, Choices{{"attention", "linear"}}),
      AMOR_KEY("eval.oryx_switch.num_sequences", eval.oryx_switch.num_sequences, at_least(1)),
      // checkpoint.*
      AMOR_KEY("checkpoint.every", checkpoint.every, at_least(0)),
      AMOR_KEY("checkpoint.keep", checkpoint.keep, at_least(1)),
      AMOR_KEY("checkpoint.signal", checkpoint.signal, {}, Choices{{"SIGUSR1", "SIGUSR2", ""}}),
      // parallel.*
      AMOR_KEY("parallel.ranks_per_run", parallel.ranks_per_run, at_least(1)),
      AMOR_KEY("device", device, {}, Choices{{"cpu", "cuda"}}),
  };
  std::sort(f.begin(), f.end(), [](const Field& a, const Field& b) { return a.key < b.key; });
  return f;
}

std::set<std::string, std::less<>> build_sections() {
  std::set<std::string, std::less<>> s;
  for (const Field& f : fields())
    for (size_t dot = f.key.find('.'); dot != std::string::npos; dot = f.key.find('.', dot + 1))
      s.insert(f.key.substr(0, dot));
  return s;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool is_null(const YAML::Node& n) { return !n.IsDefined() || n.IsNull(); }

// Quoted scalars (tag "!") and explicit !!str are strings; everything else is read as plain.
bool is_quoted(const YAML::Node& n) {
  return n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str";
}

// Plain matchers for the number literals (std::regex matches recursively, one stack frame per
// character, so a long enough scalar overflowed the stack).
size_t skip_digits(std::string_view s, size_t i) {
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i;
}
size_t skip_sign(std::string_view s, size_t i, bool minus = true) {
  return i < s.size() && (s[i] == '+' || (minus && s[i] == '-')) ? i + 1 : i;
}
// [-+]?[0-9]+
bool is_int_literal(std::string_view s) {
  size_t i = skip_sign(s, 0), j = skip_digits(s, i);
  return j > i && j == s.size();
}
// [-+]?[0-9]+(\.[0-9]+)?[eE]\+?[0-9]+
bool is_int_exp_literal(std::string_view s) {
  size_t i = skip_sign(s, 0), j = skip_digits(s, i);
  if (j == i) return false;
  if (j < s.size() && s[j] == '.') {
    size_t k = skip_digits(s, j + 1);
    if (k == j + 1) return false;
    j = k;
  }
  if (j >= s.size() || (s[j] != 'e' && s[j] != 'E')) return false;
  size_t e = skip_sign(s, j + 1, false), k = skip_digits(s, e);
  return k > e && k == s.size();
}
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool is_float_literal(std::string_view s) {
  size_t i = skip_sign(s, 0), j = 0;
  if (i < s.size() && s[i] == '.') {
    j = skip_digits(s, i + 1);
    if (j == i + 1) return false;
  } else {
    j = skip_digits(s, i);
    if (j == i) return false;
    if (j < s.size() && s[j] == '.') j = skip_digits(s, j + 1);
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    size_t e = skip_sign(s, j + 1), k = skip_digits(s, e);
    if (k == e) return false;
    j = k;
  }
  return j == s.size();
}

std::string expected(const Field& f) {
  switch (f.type) {
    case FieldType::Bool: return "true or false";
    case FieldType::Int: return "an integer";
    case FieldType::Float: return "a number";
    case FieldType::String: return "a string";
    case FieldType::StringList: return "a list of strings";
    case FieldType::IntList: return "a list of integers";
    case FieldType::FloatList: return "a list of numbers";
    case FieldType::Enum: {
      std::string s = "one of ";
      for (size_t i = 0; i < f.choices.size(); ++i)
        s += (i ? ", " : "") + (f.choices[i].empty() ? std::string("\"\"") : f.choices[i]);
      return s;
    }
  }
  return "?";
}

// Types a scalar as an integer (ints) or a number into `out`: "" when fine, kWrongType when the
// node is not such a literal, else the problem (out of range).
const std::string kWrongType = "\x01wrong type";
std::string type_number(const YAML::Node& n, bool ints, FieldValue& out) {
  if (is_null(n) || !n.IsScalar() || is_quoted(n)) return kWrongType;
  const std::string& s = n.Scalar();
  if (ints) {
    int64_t i = 0;
    if (is_int_literal(s)) {
      const char* b = s.data() + (s[0] == '+' ? 1 : 0);
      auto [p, ec] = std::from_chars(b, s.data() + s.size(), i);
      if (ec != std::errc() || p != s.data() + s.size())
        return "'" + s + "' is out of the 64-bit integer range";
    } else if (is_int_exp_literal(s)) {
      double d = std::strtod(s.c_str(), nullptr);
      if (d != std::floor(d) || std::fabs(d) > 9007199254740992.0) return kWrongType;
      i = static_cast<int64_t>(d);
    } else {
      return kWrongType;
    }
    out = i;
    return "";
  }
  if (!is_float_literal(s)) return kWrongType;
  double d = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(d)) return "'" + s + "' is out of the double range";
  out = d;
  return "";
}

}  // namespace

const std::vector<Field>& fields() {
  static const std::vector<Field> f = build_fields();
  return f;
}

const Field* find_field(std::string_view key) {
  const auto& f = fields();
  auto it = std::lower_bound(f.begin(), f.end(), key,
                             [](const Field& a, std::string_view k) { return a.key < k; });
  return it != f.end() && it->key == key ? &*it : nullptr;
}

bool is_section(std::string_view key) {
  static const std::set<std::string, std::less<>> sections = build_sections();
  return sections.find(key) != sections.end();
}

std::string suggest_key(std::string_view key, const std::vector<std::string>& candidates) {
  // A key given without its section ("d_model" for "model.d_model") is the likeliest slip.
  for (const std::string& c : candidates)
    if (c.size() > key.size() && c.compare(c.size() - key.size(), key.size(), key) == 0 &&
        c[c.size() - key.size() - 1] == '.')
      return c;
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 4) + 1;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(key, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::string suggest_config_key(std::string_view key) {
  static const std::vector<std::string> candidates = [] {
    std::vector<std::string> c;
    for (const Field& f : fields()) c.push_back(f.key);
    for (const Field& f : fields())
      for (size_t dot = f.key.find('.'); dot != std::string::npos; dot = f.key.find('.', dot + 1))
        c.push_back(f.key.substr(0, dot));
    return c;
  }();
  return suggest_key(key, candidates);
}

std::string describe_node(const YAML::Node& n) {
  if (is_null(n)) return "nothing (null)";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (is_quoted(n)) return "the quoted string " + amor::json::quote(n.Scalar());
  return "'" + n.Scalar() + "'";
}

FieldValue parse_value(const Field& f, const YAML::Node& n, const Location& where,
                       const std::string& context) {
  auto bad = [&](const std::string& problem) -> FieldValue {
    fail(where, context + "key '" + f.key + "': " + problem);
  };
  auto wrong_type = [&]() { return bad("expected " + expected(f) + ", got " + describe_node(n)); };

  FieldValue v;
  if (f.type == FieldType::StringList) {
    if (!n.IsSequence()) return wrong_type();
    std::vector<std::string> items;
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node& item = n[i];
      if (is_null(item) || !item.IsScalar())
        return bad(fmt::format("item {}: expected a string, got {}", i + 1, describe_node(item)));
      items.push_back(item.Scalar());
    }
    v = std::move(items);
  } else if (f.type == FieldType::IntList || f.type == FieldType::FloatList) {
    if (!n.IsSequence()) return wrong_type();
    const bool ints = f.type == FieldType::IntList;
    std::vector<int64_t> is;
    std::vector<double> ds;
    for (size_t i = 0; i < n.size(); ++i) {
      FieldValue item;
      std::string problem = type_number(n[i], ints, item);
      if (problem == kWrongType)
        return bad(fmt::format("item {}: expected {}, got {}", i + 1, ints ? "an integer" : "a number",
                               describe_node(n[i])));
      if (!problem.empty()) return bad(fmt::format("item {}: {}", i + 1, problem));
      if (ints) is.push_back(std::get<int64_t>(item));
      else ds.push_back(std::get<double>(item));
    }
    if (ints) v = std::move(is);
    else v = std::move(ds);
  } else {
    if (is_null(n) || !n.IsScalar()) return wrong_type();
    const std::string& s = n.Scalar();
    bool quoted = is_quoted(n);
    switch (f.type) {
      case FieldType::Bool:
        if (quoted) return wrong_type();
        if (s == "true" || s == "True" || s == "TRUE") {
          v = true;
        } else if (s == "false" || s == "False" || s == "FALSE") {
          v = false;
        } else {
          return wrong_type();
        }
        break;
      case FieldType::Int:
      case FieldType::Float: {
        std::string problem = type_number(n, f.type == FieldType::Int, v);
        if (problem == kWrongType) return wrong_type();
        if (!problem.empty()) return bad(problem);
        break;
      }
      case FieldType::String:
        v = s;
        break;
      case FieldType::Enum:
        if (std::find(f.choices.begin(), f.choices.end(), s) == f.choices.end())
          return bad("expected " + expected(f) + ", got " +
                     (quoted || s.empty() ? amor::json::quote(s) : "'" + s + "'"));
        v = s;
        break;
      case FieldType::StringList:
      case FieldType::IntList:
      case FieldType::FloatList:
        break;
    }
  }
  if (f.check) {
    std::string problem = f.check(v);
    if (!problem.empty()) return bad(problem);
  }
  return v;
}

std::string format_double(double d) {
  // Python's repr: the shortest digits that read back to d, in fixed notation when the decimal
  // exponent is in [-4, 16), else scientific with a signed two-digit (or longer) exponent.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, end);  // "-1.2345e-05"
  size_t e = sci.find('e');
  if (e == std::string::npos) return sci;  // inf/nan never reach here (rejected on input)
  int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) return sci;
  std::string sign = sci[0] == '-' ? "-" : "";
  std::string digits;
  for (size_t i = sign.size(); i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out;
  if (exp >= 0) {
    if (digits.size() < static_cast<size_t>(exp) + 1) digits.resize(exp + 1, '0');
    std::string frac = digits.substr(exp + 1);
    out = digits.substr(0, exp + 1) + "." + (frac.empty() ? "0" : frac);
  } else {
    out = "0." + std::string(-exp - 1, '0') + digits;
  }
  return sign + out;
}

std::string format_value(const FieldValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_double(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return x;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s = "[";
          for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + x[i];
          return s + "]";
        } else {
          std::string s = "[";
          for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + format_value(FieldValue(x[i]));
          return s + "]";
        }
      },
      v);
}

std::string json_value(const FieldValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return amor::json::quote(*s);
  if (const auto* l = std::get_if<std::vector<std::string>>(&v)) {
    std::string s = "[";
    for (size_t i = 0; i < l->size(); ++i) s += (i ? ", " : "") + amor::json::quote((*l)[i]);
    return s + "]";
  }
  return format_value(v);
}

}  // namespace amor::config
