// The README key table from the schema (key_table.h).
#include "runner/config/key_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace amor::config {
namespace {

std::string bound(double x) { return format_limit(x); }

// "≥ 1", "> 0", "in [0, 1)", "" for no bounds.
std::string range_text(const keys::Allowed& a) {
  const bool lo = !std::isinf(a.lo), hi = !std::isinf(a.hi);
  if (lo && hi)
    return fmt::format("in {}{}, {}{}", a.lo_open ? "(" : "[", bound(a.lo), bound(a.hi),
                       a.hi_open ? ")" : "]");
  if (lo) return fmt::format("{} {}", a.lo_open ? ">" : "≥", bound(a.lo));
  if (hi) return fmt::format("{} {}", a.hi_open ? "<" : "≤", bound(a.hi));
  return "";
}

std::string with_range(std::string type, const keys::Allowed& a) {
  std::string r = range_text(a);
  return r.empty() ? type : type + " " + r;
}

// "a \| b \| \"\"": Markdown table cells need their bars escaped.
std::string choices_text(std::string_view one_of) {
  std::string out;
  for (const std::string& c : keys::choice_list(one_of))
    out += (out.empty() ? "" : " \\| ") + (c.empty() ? std::string("\"\"") : c);
  return out;
}

std::string default_text(const Field& f) {
  FieldValue v = f.get(RunConfig{});
  if (const auto* s = std::get_if<std::string>(&v); s && s->empty()) return "`\"\"`";
  return "`" + format_value(v) + "`";
}

}  // namespace

std::string describe_values(const Field& f) {
  const keys::Allowed& a = f.allowed;
  switch (f.type) {
    case FieldType::Bool: return "bool";
    case FieldType::Int: return a.one_of.empty() ? with_range("int", a) : choices_text(a.one_of);
    case FieldType::Float: return with_range("float", a);
    case FieldType::String:
      if (!a.text_values.empty()) return "string: " + std::string(a.text_values);
      if (a.letters.empty()) return "string";
      {
        std::string s = "string of ";
        for (size_t i = 0; i < a.letters.size(); ++i) s += (i ? ", " : "") + std::string(1, a.letters[i]);
        return s;
      }
    case FieldType::Enum: return choices_text(a.one_of);
    case FieldType::StringList: return "list of strings";
    case FieldType::IntList: return "list of " + with_range("int", a);
    case FieldType::FloatList: return "list of " + with_range("floats", a);
  }
  return "?";
}

std::string key_table_markdown() {
  std::vector<const Field*> rows;
  for (const Field& f : fields()) rows.push_back(&f);
  std::sort(rows.begin(), rows.end(), [](const Field* a, const Field* b) { return a->order < b->order; });
  std::string out = "| key | type / values | default | notes |\n| --- | --- | --- | --- |\n";
  for (const Field* f : rows)
    out += fmt::format("| `{}` | {} | {} |{}|\n", f->key, describe_values(*f), default_text(*f),
                       f->doc.empty() ? " " : " " + f->doc + " ");
  return out;
}

}  // namespace amor::config
