// The built-in corpus: the King James Bible (public domain), as Debian's bible-kjv-text package
// ships it. The text is stored compressed in /usr/lib/bible.data and read through the package's
// own `bible` program (package bible-kjv), which prints every verse on one line:
//   "Ge1:1 In the beginning God created the heaven and the earth."
// One document per chapter (1,189 of them, 31,102 verses, ~4.4 MB of English): the chapter's
// verses, one per line, without the references.
//
// RULER-style essay haystacks and the prepare_corpus.sh shards both come from here.
#pragma once
#include <string>
#include <vector>

namespace amor::corpus {

struct CorpusDocument {
  std::string title;  // "Genesis 1"
  std::string text;
};

// The `bible` program: $AMOR_BIBLE if set, else the first `bible` on PATH, else /usr/bin/bible;
// "" if none is executable.
std::string find_bible_program();

// Every chapter, in canonical order. `program` overrides find_bible_program(). Missing packages
// or output that is not the expected 66 books / 1,189 chapters / 31,102 verses are errors saying
// what to install or what was wrong.
std::vector<CorpusDocument> kjv_chapters(const std::string& program = "");

// One JSON object per line: {"title": ..., "text": ...}; written atomically.
void write_jsonl(const std::vector<CorpusDocument>& docs, const std::string& path);

}  // namespace amor::corpus
