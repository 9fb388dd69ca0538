// A small JSON reader and writer: safetensors headers, tokenizer.json (megabytes, so it is a
// single pass with no copies of the input beyond the values), run metadata.
//
// Parse errors name the source (a file name or "<string>"), line and column:
//   "tokenizer.json:3:17: expected ':' after an object key"
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace amor::json {

class Value;
using Object = std::vector<std::pair<std::string, Value>>;  // keeps file order (merges, vocab)
using Array = std::vector<Value>;

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(double d) : v_(d) {}
  Value(int64_t i) : v_(static_cast<double>(i)), integer_(i), is_integer_(true) {}
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}

  Kind kind() const;
  bool is_null() const { return kind() == Kind::Null; }
  bool is_object() const { return kind() == Kind::Object; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_number() const { return kind() == Kind::Number; }

  // Accessors throw amor::Error naming the expected kind ("what" says which value it was).
  bool as_bool(const std::string& what = "value") const;
  double as_double(const std::string& what = "value") const;
  int64_t as_int(const std::string& what = "value") const;  // exact integers only
  const std::string& as_string(const std::string& what = "value") const;
  const Array& as_array(const std::string& what = "value") const;
  const Object& as_object(const std::string& what = "value") const;

  // Object lookup: nullptr if absent (find) or an error naming the key (at).
  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key) const;

  std::string dump() const;  // compact JSON

 private:
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      v_;
  int64_t integer_ = 0;
  bool is_integer_ = false;
  friend class Parser;
};

Value parse(std::string_view text, const std::string& source = "<string>");
Value parse_file(const std::string& path);
std::string quote(std::string_view s);  // a JSON string literal with escapes

}  // namespace amor::json
