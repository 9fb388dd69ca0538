// Run names from swept values (see run_name.h for the scheme).
#include "runner/config/run_name.h"

namespace amor::config {
namespace {

// The last `n` dotted components of `key`.
std::string suffix(const std::string& key, size_t n) {
  size_t pos = key.size();
  for (size_t i = 0; i < n; ++i) {
    size_t dot = pos == 0 ? std::string::npos : key.rfind('.', pos - 1);
    if (dot == std::string::npos) return key;
    pos = dot;
  }
  return key.substr(pos + 1);
}

}  // namespace

std::vector<std::string> short_names(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    for (size_t n = 1;; ++n) {
      std::string s = suffix(key, n);
      bool clash = false;
      for (const std::string& other : keys)
        if (other != key && suffix(other, n) == s) clash = true;
      if (!clash || s == key) {
        out.push_back(s);
        break;
      }
    }
  }
  return out;
}

std::string sanitize_name(std::string_view s) {
  std::string out;
  for (char ch : s) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '+' || ch == '-';
    out += ok ? ch : '_';
  }
  if (!out.empty() && out[0] == '.') out[0] = '_';  // no hidden directories
  return out;
}

std::string name_part(const std::string& short_name, const Field& field, const FieldValue& v) {
  switch (field.type) {
    case FieldType::Enum: {
      const std::string& s = std::get<std::string>(v);
      return s.empty() ? short_name + "_none" : s;
    }
    case FieldType::Bool:
      return std::get<bool>(v) ? short_name : "no_" + short_name;
    case FieldType::Int:
    case FieldType::Float:
      return short_name + format_value(v);
    case FieldType::String: {
      const std::string& s = std::get<std::string>(v);
      return short_name + "_" + (s.empty() ? "none" : s);
    }
    case FieldType::StringList: {
      const auto& l = std::get<std::vector<std::string>>(v);
      std::string joined;
      for (const std::string& s : l) joined += (joined.empty() ? "" : "+") + s;
      return short_name + "_" + (l.empty() ? "none" : joined);
    }
    case FieldType::IntList:
    case FieldType::FloatList: {
      std::string joined = format_value(v);  // "[256, 512]"
      joined = joined.substr(1, joined.size() - 2);
      for (size_t p; (p = joined.find(", ")) != std::string::npos;) joined.replace(p, 2, "+");
      return short_name + "_" + (joined.empty() ? "none" : joined);
    }
  }
  return short_name;
}

std::string join_run_name(const std::vector<std::string>& parts) {
  if (parts.empty()) return "base";
  std::string name;
  for (const std::string& p : parts) name += (name.empty() ? "" : "-") + p;
  name = sanitize_name(name);
  if (name.size() > 200) name.resize(200);
  return name;
}

}  // namespace amor::config
