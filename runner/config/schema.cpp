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

// The key type a member's C++ type makes (a string with choices is an enum).
template <class T>
FieldType field_type(const keys::Allowed& allowed) {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldType::Bool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return FieldType::Int;
  } else if constexpr (std::is_same_v<T, double>) {
    return FieldType::Float;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return allowed.one_of.empty() ? FieldType::String : FieldType::Enum;
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    return FieldType::IntList;
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    return FieldType::FloatList;
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>, "unsupported config key type");
    return FieldType::StringList;
  }
}

// A declare_keys visitor that turns struct S's listing (S reached from a RunConfig by `reach`)
// into Fields named `prefix` + key, recursing into sections.
template <class S>
struct FieldCollector {
  std::string prefix;
  std::function<S&(RunConfig&)> reach;
  std::function<const S&(const RunConfig&)> creach;
  std::vector<Field>* out;

  template <class B, class T>
  void key(std::string_view name, T B::*m, const keys::Allowed& allowed, std::string_view doc) {
    static_assert(std::is_base_of_v<B, S>, "a listing names a member of another struct");
    Field f;
    f.key = prefix + std::string(name);
    f.type = field_type<T>(allowed);
    if (f.type == FieldType::Enum) f.choices = keys::choice_list(allowed.one_of);
    f.get = [cr = creach, m](const RunConfig& c) -> FieldValue { return FieldValue(cr(c).*m); };
    f.set = [r = reach, m](RunConfig& c, const FieldValue& v) { r(c).*m = std::get<T>(v); };
    f.allowed = allowed;
    f.doc = std::string(doc);
    f.order = out->size();
    out->push_back(std::move(f));
  }

  template <class B, class Sub>
  void section(std::string_view name, Sub B::*m) {
    static_assert(std::is_base_of_v<B, S>, "a listing names a member of another struct");
    FieldCollector<Sub> sub{prefix + std::string(name) + ".",
                            [r = reach, m](RunConfig& c) -> Sub& { return r(c).*m; },
                            [cr = creach, m](const RunConfig& c) -> const Sub& { return cr(c).*m; },
                            out};
    keys::visit_keys<Sub>(sub);
  }
};

std::vector<Field> build_fields() {
  std::vector<Field> f;
  FieldCollector<RunConfig> root{"", [](RunConfig& c) -> RunConfig& { return c; },
                                 [](const RunConfig& c) -> const RunConfig& { return c; }, &f};
  keys::visit_keys<RunConfig>(root);
  std::sort(f.begin(), f.end(), [](const Field& a, const Field& b) { return a.key < b.key; });
  for (size_t i = 1; i < f.size(); ++i)
    if (f[i].key == f[i - 1].key) throw std::logic_error("config key declared twice: " + f[i].key);
  return f;
}

// The problem with one number against the declared range, or "". Integers are written as
// integers; an open end is exclusive; infinite ends are left out of the message.
template <class N>
std::string number_problem(N x, const keys::Allowed& a) {
  const double d = static_cast<double>(x);
  const bool lo_ok = a.lo_open ? d > a.lo : d >= a.lo, hi_ok = a.hi_open ? d < a.hi : d <= a.hi;
  if (lo_ok && hi_ok) return "";
  auto text = [](double bound) {
    return std::is_same_v<N, int64_t> ? format_limit(bound) : format_double(bound);
  };
  const std::string got = std::is_same_v<N, int64_t> ? fmt::format("{}", x) : format_double(d);
  if (std::isinf(a.hi)) {
    if (std::is_same_v<N, int64_t> && !a.lo_open)
      return fmt::format("must be at least {}, got {}", text(a.lo), got);
    return fmt::format("must be {} {}, got {}", a.lo_open ? ">" : ">=", text(a.lo), got);
  }
  if (std::isinf(a.lo)) {
    if (std::is_same_v<N, int64_t> && !a.hi_open)
      return fmt::format("must be at most {}, got {}", text(a.hi), got);
    return fmt::format("must be {} {}, got {}", a.hi_open ? "<" : "<=", text(a.hi), got);
  }
  return fmt::format("must be in {}{}, {}{}, got {}", a.lo_open ? "(" : "[", text(a.lo), text(a.hi),
                     a.hi_open ? ")" : "]", got);
}

std::string int_problem(int64_t x, const keys::Allowed& a) {
  if (!a.one_of.empty()) {
    const std::vector<std::string> choices = keys::choice_list(a.one_of);
    if (std::find(choices.begin(), choices.end(), std::to_string(x)) == choices.end()) {
      std::string list;
      for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
      return fmt::format("must be one of {}, got {}", list, x);
    }
  }
  return number_problem(x, a);
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
  std::string problem = value_problem(f, v);
  if (!problem.empty()) return bad(problem);
  return v;
}

std::string format_limit(double x) {
  // 2^20 and beyond: the size limits (models/core/config_keys.h) read better as powers of two.
  int exp = 0;
  if (x >= 1048576.0 && std::frexp(x, &exp) == 0.5) return fmt::format("2^{}", exp - 1);
  return fmt::format("{}", x);
}

std::string value_problem(const Field& f, const FieldValue& v) {
  const keys::Allowed& a = f.allowed;
  if (const auto* i = std::get_if<int64_t>(&v)) return int_problem(*i, a);
  if (const auto* d = std::get_if<double>(&v)) return number_problem(*d, a);
  if (const auto* s = std::get_if<std::string>(&v)) {
    for (char ch : *s)
      if (!a.letters.empty() && a.letters.find(ch) == std::string_view::npos)
        return fmt::format("'{}' may only contain the letters {}", *s, a.letters);
    return a.text_problem ? a.text_problem(*s) : "";
  }
  auto items = [](const auto& list, auto problem_of) {
    for (size_t i = 0; i < list.size(); ++i)
      if (std::string p = problem_of(list[i]); !p.empty()) return fmt::format("item {}: {}", i + 1, p);
    return std::string();
  };
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v))
    return items(*l, [&](int64_t x) { return int_problem(x, a); });
  if (const auto* l = std::get_if<std::vector<double>>(&v))
    return items(*l, [&](double x) { return number_problem(x, a); });
  return "";
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
