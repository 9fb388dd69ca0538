#include "data/json/json.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernels/core/error.h"

namespace amor::json {

Value::Kind Value::kind() const {
  switch (v_.index()) {
    case 0: return Kind::Null;
    case 1: return Kind::Bool;
    case 2: return Kind::Number;
    case 3: return Kind::String;
    case 4: return Kind::Array;
    default: return Kind::Object;
  }
}

static const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return "a boolean";
    case Value::Kind::Number: return "a number";
    case Value::Kind::String: return "a string";
    case Value::Kind::Array: return "an array";
    case Value::Kind::Object: return "an object";
  }
  return "?";
}

#define AMOR_JSON_EXPECT(kind_enum, kind_text)                                           \
  AMOR_CHECK(kind() == kind_enum, "json: {} should be {}, found {}", what, kind_text, \
             kind_name(kind()))

bool Value::as_bool(const std::string& what) const {
  AMOR_JSON_EXPECT(Kind::Bool, "a boolean");
  return std::get<bool>(v_);
}
double Value::as_double(const std::string& what) const {
  AMOR_JSON_EXPECT(Kind::Number, "a number");
  return std::get<double>(v_);
}
int64_t Value::as_int(const std::string& what) const {
  AMOR_JSON_EXPECT(Kind::Number, "a number");
  AMOR_CHECK(is_integer_, "json: {} should be an integer, found {}", what, std::get<double>(v_));
  return integer_;
}
const std::string& Value::as_string(const std::string& what) const {
  AMOR_JSON_EXPECT(Kind::String, "a string");
  return std::get<std::string>(v_);
}
const Array& Value::as_array(const std::string& what) const {
  AMOR_JSON_EXPECT(Kind::Array, "an array");
  return *std::get<std::shared_ptr<Array>>(v_);
}
const Object& Value::as_object(const std::string& what) const {
  AMOR_JSON_EXPECT(Kind::Object, "an object");
  return *std::get<std::shared_ptr<Object>>(v_);
}

const Value* Value::find(const std::string& key) const {
  if (kind() != Kind::Object) return nullptr;
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const Value& Value::at(const std::string& key) const {
  const Value* v = find(key);
  AMOR_CHECK(v != nullptr, "json: missing key '{}'", key);
  return *v;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string Value::dump() const {
  switch (kind()) {
    case Kind::Null: return "null";
    case Kind::Bool: return std::get<bool>(v_) ? "true" : "false";
    case Kind::Number:
      if (is_integer_) return std::to_string(integer_);
      return fmt::format("{:.17g}", std::get<double>(v_));
    case Kind::String: return quote(std::get<std::string>(v_));
    case Kind::Array: {
      std::string s = "[";
      const Array& a = as_array();
      for (size_t i = 0; i < a.size(); ++i) s += (i ? "," : "") + a[i].dump();
      return s + "]";
    }
    case Kind::Object: {
      std::string s = "{";
      const Object& o = as_object();
      for (size_t i = 0; i < o.size(); ++i)
        s += (i ? "," : "") + quote(o[i].first) + ":" + o[i].second.dump();
      return s + "}";
    }
  }
  return "null";
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  Value document() {
    Value v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t j = 0; j < i_ && j < s_.size(); ++j) {
      if (s_[j] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    throw Error(fmt::format("{}:{}:{}: {}", source_, line, col, msg));
  }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      i_++;
  }

  bool consume(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      i_++;
      return true;
    }
    return false;
  }

  Value value(int depth) {
    if (depth > 256) fail("nesting deeper than 256 levels");
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of input, expected a value");
    char c = s_[i_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    if (s_.substr(i_, 4) == "true") { i_ += 4; return Value(true); }
    if (s_.substr(i_, 5) == "false") { i_ += 5; return Value(false); }
    if (s_.substr(i_, 4) == "null") { i_ += 4; return Value(); }
    fail(fmt::format("unexpected character '{}'", c));
  }

  Value object(int depth) {
    i_++;  // '{'
    Object o;
    if (consume('}')) return Value(std::move(o));
    while (true) {
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key in an object");
      std::string key = string();
      if (!consume(':')) fail("expected ':' after an object key");
      o.emplace_back(std::move(key), value(depth + 1));
      if (consume(',')) continue;
      if (consume('}')) break;
      fail("expected ',' or '}' in an object");
    }
    return Value(std::move(o));
  }

  Value array(int depth) {
    i_++;  // '['
    Array a;
    if (consume(']')) return Value(std::move(a));
    while (true) {
      a.push_back(value(depth + 1));
      if (consume(',')) continue;
      if (consume(']')) break;
      fail("expected ',' or ']' in an array");
    }
    return Value(std::move(a));
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad hex digit in a \\u escape");
    }
    return v;
  }

  std::string string() {
    i_++;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {  // a surrogate pair
            if (i_ + 2 <= s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
              i_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xdc00 || lo >= 0xe000) fail("unpaired surrogate in a \\u escape");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else {
              fail("unpaired surrogate in a \\u escape");
            }
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            fail("unpaired surrogate in a \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    return out;
  }

  Value number() {
    size_t start = i_;
    if (s_[i_] == '-') i_++;
    bool integral = true;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    if (i_ < s_.size() && s_[i_] == '.') {
      integral = false;
      i_++;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      integral = false;
      i_++;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) i_++;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    }
    std::string tok(s_.substr(start, i_ - start));
    if (tok == "-" || tok.empty()) fail("malformed number");
    char* end = nullptr;
    if (integral && tok.size() < 19) {
      Value v(static_cast<int64_t>(std::strtoll(tok.c_str(), &end, 10)));
      return v;
    }
    double d = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) fail("malformed number '" + tok + "'");
    return Value(d);
  }

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0;
};

Value parse(std::string_view text, const std::string& source) {
  return Parser(text, source).document();
}

Value parse_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AMOR_CHECK(f.good(), "{}: cannot open for reading", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

}  // namespace amor::json
