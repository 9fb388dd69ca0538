// Task jsonl files with errors naming file, line and field (see jsonl_records.h).
#include "runner/eval/jsonl_records.h"

#include <fstream>

#include "kernels/core/error.h"

namespace amor::eval {
namespace {

std::string shorten(const std::string& s) { return s.size() > 60 ? s.substr(0, 60) + "..." : s; }

}  // namespace

std::string JsonlRecord::where() const { return fmt::format("{}:{}", path, line); }

void JsonlRecord::fail(const std::string& name, const std::string& what) const {
  throw Error(fmt::format("{}: field '{}' {}", where(), name, what));
}

const json::Value& JsonlRecord::field(const std::string& name) const {
  const json::Value* v = value.find(name);
  if (v == nullptr) {
    std::string keys;
    for (const auto& [k, _] : value.as_object()) keys += (keys.empty() ? "" : ", ") + k;
    throw Error(fmt::format("{}: no field '{}' (the object has: {})", where(), name, keys));
  }
  return *v;
}

const std::string& JsonlRecord::string(const std::string& name) const {
  const json::Value& v = field(name);
  if (!v.is_string()) fail(name, "must be a string, got " + shorten(v.dump()));
  return v.as_string();
}

int64_t JsonlRecord::integer(const std::string& name) const {
  const json::Value& v = field(name);
  if (!v.is_number()) fail(name, "must be an integer, got " + shorten(v.dump()));
  try {
    return v.as_int();
  } catch (const Error&) {
    fail(name, "must be an integer, got " + shorten(v.dump()));
  }
}

int64_t JsonlRecord::integer_or_digits(const std::string& name) const {
  const json::Value& v = field(name);
  if (v.is_string()) {
    const std::string& s = v.as_string();
    bool digits = !s.empty() && s.size() < 18;
    for (char c : s) digits = digits && c >= '0' && c <= '9';
    if (!digits) fail(name, "must be an integer or a string of digits, got " + shorten(v.dump()));
    return std::stoll(s);
  }
  return integer(name);
}

std::vector<std::string> JsonlRecord::strings(const std::string& name) const {
  const json::Value& v = field(name);
  if (!v.is_array()) fail(name, "must be an array of strings, got " + shorten(v.dump()));
  std::vector<std::string> out;
  for (const auto& e : v.as_array()) {
    if (!e.is_string())
      fail(name, fmt::format("must be an array of strings, but element {} is {}", out.size(),
                             shorten(e.dump())));
    out.push_back(e.as_string());
  }
  return out;
}

std::vector<JsonlRecord> read_jsonl(const std::string& path, int64_t limit, const std::string& task) {
  AMOR_CHECK(!path.empty(), "{}: no data file given (the task reads a jsonl file: set its path)",
             task);
  std::ifstream in(path, std::ios::binary);
  AMOR_CHECK(in.good(), "{}: {}: no such file or not readable", task, path);
  std::vector<JsonlRecord> records;
  std::string text;
  size_t lineno = 0;
  while ((limit < 0 || static_cast<int64_t>(records.size()) < limit) && std::getline(in, text)) {
    ++lineno;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    JsonlRecord r{path, lineno, {}};
    try {
      r.value = json::parse(text, "jsonl");
    } catch (const Error& e) {
      // The parser says "jsonl:1:COL: ..." for the one line it saw: name the file's line instead.
      const std::string what = e.what(), prefix = "jsonl:1:";
      if (what.rfind(prefix, 0) == 0)
        throw Error(fmt::format("{}: {}:{}:{}", task, path, lineno, what.substr(prefix.size())));
      throw Error(fmt::format("{}: {}:{}: {}", task, path, lineno, what));
    }
    AMOR_CHECK(r.value.is_object(), "{}: {}:{}: expected a JSON object, got {}", task, path, lineno,
               shorten(text));
    records.push_back(std::move(r));
  }
  AMOR_CHECK(!records.empty(), "{}: {}: the file holds no records", task, path);
  return records;
}

}  // namespace amor::eval
