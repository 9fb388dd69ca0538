// The converter's inputs: which files a list of paths names, and the documents inside them.
//
// - a text file is one document (its whole content, a leading UTF-8 BOM dropped), or with
//   TextDocs::Paragraphs one document per block of lines between blank lines, or with
//   TextDocs::Lines one per non-blank line (line ends are not part of those documents);
// - a .jsonl file holds one document per line, in the string field `field` ("text"); blank lines
//   are skipped; a line that is not a JSON object with that string field is an error naming
//   file:line;
// - a directory stands for every regular file below it (recursively, sorted by path, hidden
//   names and .tok shards skipped), each read as above by its extension.
// All text must be UTF-8: a binary or Latin-1 file is an error naming file:line, not a corpus of
// garbage tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace amor::shards {

struct InputFile {
  enum class Kind { Text, Jsonl };
  std::string path;
  Kind kind = Kind::Text;
  uint64_t bytes = 0;
};

// How a plain text file is cut into documents: "file", "paragraphs", "lines".
enum class TextDocs { File, Paragraphs, Lines };
TextDocs parse_text_docs(const std::string& name);  // error listing the allowed names

struct ReadOptions {
  std::string field = "text";  // the jsonl field holding the text
  TextDocs text_docs = TextDocs::File;
};

// Expands the command line's inputs. Missing paths and things that are neither a regular file
// nor a directory are errors naming them.
std::vector<InputFile> list_inputs(const std::vector<std::string>& paths);

// Called once per document: its text, where it came from ("a.txt" or "b.jsonl:12"), and how many
// input bytes it accounts for (for progress).
using DocumentFn = std::function<void(std::string_view text, const std::string& where, uint64_t bytes)>;

void read_documents(const InputFile& file, const ReadOptions& options, const DocumentFn& fn);

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code points past
// U+10FFFF included), or npos if `s` is valid.
size_t find_invalid_utf8(std::string_view s);

}  // namespace amor::shards
