// Converter inputs: listing files and reading documents from text and jsonl (see corpus_inputs.h).
#include "data/shards/corpus_inputs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/json/json.h"
#include "kernels/core/error.h"

namespace fs = std::filesystem;

namespace amor::shards {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

InputFile make_input(const fs::path& p) {
  InputFile f;
  f.path = p.string();
  f.kind = ends_with(f.path, ".jsonl") ? InputFile::Kind::Jsonl : InputFile::Kind::Text;
  std::error_code ec;
  f.bytes = fs::file_size(p, ec);
  AMOR_CHECK(!ec, "{}: cannot read its size: {}", f.path, ec.message());
  return f;
}

std::ifstream open_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AMOR_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  return in;
}

// "not UTF-8 text" with the line and column of the bad byte.
[[noreturn]] void fail_utf8(const std::string& path, std::string_view text, size_t bad, size_t first_line) {
  size_t line = first_line + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
  size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
  line_start = (line_start == std::string_view::npos || bad == 0) ? 0 : line_start + 1;
  throw Error(fmt::format("{}:{}: not UTF-8 text (byte 0x{:02x} at column {}); convert the file to UTF-8",
                          path, line, static_cast<unsigned char>(text[bad]), bad - line_start + 1));
}

// The JSON parser reports "<source>:<line>:<col>: msg" for the string it was given; a jsonl line is
// parsed alone, so its own line is always 1: rewrite that to the file's line.
[[noreturn]] void fail_json(const std::string& path, size_t line, const std::string& what) {
  const std::string prefix = "jsonl:1:";
  if (what.rfind(prefix, 0) == 0) throw Error(fmt::format("{}:{}:{}", path, line, what.substr(prefix.size())));
  throw Error(fmt::format("{}:{}: {}", path, line, what));
}

void read_jsonl(const InputFile& file, const std::string& field, const DocumentFn& fn) {
  std::ifstream in = open_input(file.path);
  std::string line;
  size_t lineno = 0;
  uint64_t bytes = 0;  // input bytes since the last document (blank lines included)
  while (std::getline(in, line)) {
    ++lineno;
    bytes += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    size_t bad = find_invalid_utf8(line);
    if (bad != std::string::npos) fail_utf8(file.path, line, bad, lineno);
    json::Value v;
    try {
      v = json::parse(line, "jsonl");
    } catch (const Error& e) {
      fail_json(file.path, lineno, e.what());
    }
    AMOR_CHECK(v.is_object(), "{}:{}: expected a JSON object with a '{}' field, got {}", file.path, lineno,
               field, line.size() > 40 ? line.substr(0, 40) + "..." : line);
    const json::Value* t = v.find(field);
    if (t == nullptr) {
      std::string keys;
      for (const auto& [k, _] : v.as_object()) keys += (keys.empty() ? "" : ", ") + k;
      throw Error(fmt::format("{}:{}: no '{}' field (the object has: {})", file.path, lineno, field,
                              keys.empty() ? "no fields" : keys));
    }
    AMOR_CHECK(t->is_string(), "{}:{}: field '{}' must be a string, got {}", file.path, lineno, field,
               t->dump().substr(0, 40));
    fn(t->as_string(), fmt::format("{}:{}", file.path, lineno), bytes);
    bytes = 0;
  }
  AMOR_CHECK(!in.bad(), "{}: read failed: {}", file.path, std::strerror(errno));
}

// Paragraph or line documents of a whole (validated) text.
void split_text(const std::string& path, std::string_view text, TextDocs mode, const DocumentFn& fn) {
  std::string doc;
  size_t lineno = 0, doc_line = 0;
  uint64_t bytes = 0;
  auto emit = [&] {
    if (!doc.empty()) fn(doc, fmt::format("{}:{}", path, doc_line), bytes);
    doc.clear();
    bytes = 0;
  };
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(at, end - at);
    bytes += end - at + (nl == std::string_view::npos ? 0 : 1);
    at = end + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t\f\v") == std::string_view::npos) {
      emit();  // a blank line ends a paragraph
      continue;
    }
    if (doc.empty()) doc_line = lineno;
    else doc += '\n';
    doc += line;
    if (mode == TextDocs::Lines) emit();
  }
  emit();
}

void read_text(const InputFile& file, TextDocs mode, const DocumentFn& fn) {
  std::ifstream in = open_input(file.path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  AMOR_CHECK(!in.bad(), "{}: read failed: {}", file.path, std::strerror(errno));
  std::string_view v(text);
  if (v.substr(0, 3) == "\xef\xbb\xbf") v.remove_prefix(3);  // a BOM is an encoding mark, not text
  size_t bad = find_invalid_utf8(v);
  if (bad != std::string::npos) fail_utf8(file.path, v, bad, 1);
  if (mode == TextDocs::File) fn(v, file.path, text.size());
  else split_text(file.path, v, mode, fn);
}

}  // namespace

std::vector<InputFile> list_inputs(const std::vector<std::string>& paths) {
  std::vector<InputFile> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);
    AMOR_CHECK(fs::exists(st), "{}: no such file or directory", p);
    if (fs::is_regular_file(st)) {
      AMOR_CHECK(!ends_with(p, ".tok"), "{}: a token shard, not text (amor-data stats describes it)", p);
      files.push_back(make_input(p));
    } else if (fs::is_directory(st)) {
      std::vector<fs::path> found;
      fs::recursive_directory_iterator it(p, fs::directory_options::none, ec), end;
      AMOR_CHECK(!ec, "{}: cannot list the folder: {}", p, ec.message());
      for (; it != end; it.increment(ec)) {
        AMOR_CHECK(!ec, "{}: cannot list the folder: {}", p, ec.message());
        const fs::path& e = it->path();
        if (e.filename().string().rfind('.', 0) == 0) {  // .git, editor backups: not corpus
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        // Shards (an --out folder inside the corpus folder) are output, not input.
        if (it->is_regular_file() && e.extension() != ".tok") found.push_back(e);
      }
      AMOR_CHECK(!ec, "{}: cannot list the folder: {}", p, ec.message());
      std::sort(found.begin(), found.end());
      for (const fs::path& e : found) files.push_back(make_input(e));
    } else {
      throw Error(fmt::format("{}: not a regular file or directory", p));
    }
  }
  return files;
}

TextDocs parse_text_docs(const std::string& name) {
  if (name == "file") return TextDocs::File;
  if (name == "paragraphs") return TextDocs::Paragraphs;
  if (name == "lines") return TextDocs::Lines;
  throw Error(fmt::format("--text-docs: '{}' is not one of file, paragraphs, lines", name));
}

void read_documents(const InputFile& file, const ReadOptions& options, const DocumentFn& fn) {
  if (file.kind == InputFile::Kind::Jsonl) read_jsonl(file, options.field, fn);
  else read_text(file, options.text_docs, fn);
}

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace amor::shards
