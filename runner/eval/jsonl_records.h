// Reading a task's jsonl file (one JSON object per line, blank lines skipped) with errors that
// name the file, the line and the field:
//   "piqa.jsonl:3: field 'label' must be an integer, got \"two\""
//   "piqa.jsonl:4:7: expected ':' after an object key"
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/json/json.h"

namespace amor::eval {

struct JsonlRecord {
  std::string path;
  size_t line = 0;
  json::Value value;  // an object

  std::string where() const;  // "path:line"
  const json::Value& field(const std::string& name) const;  // error if absent
  const std::string& string(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  // An integer written either as a JSON integer or as a string of digits (HF hellaswag's "label").
  int64_t integer_or_digits(const std::string& name) const;
  std::vector<std::string> strings(const std::string& name) const;  // array of strings
  [[noreturn]] void fail(const std::string& name, const std::string& what) const;
};

// The records of a jsonl file, at most `limit` of them (-1: all). A missing file, an unreadable
// line, a line that is not a JSON object, and a file without any record are errors. `task` names
// the task in the messages.
std::vector<JsonlRecord> read_jsonl(const std::string& path, int64_t limit, const std::string& task);

}  // namespace amor::eval
