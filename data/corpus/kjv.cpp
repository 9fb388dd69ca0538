// The King James Bible as the built-in corpus (see kjv.h).
#include "data/corpus/kjv.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "data/json/json.h"
#include "data/shards/atomic_file.h"
#include "kernels/core/error.h"

namespace amor::corpus {
namespace {

constexpr int kBooks = 66;
constexpr size_t kChapters = 1189;
constexpr size_t kVerses = 31102;

// The `bible` program's book abbreviations, in canonical order, with the names used in titles.
constexpr std::array<std::pair<const char*, const char*>, kBooks> kBookNames = {{
    {"Ge", "Genesis"}, {"Exo", "Exodus"}, {"Lev", "Leviticus"}, {"Num", "Numbers"},
    {"Deu", "Deuteronomy"}, {"Josh", "Joshua"}, {"Jdgs", "Judges"}, {"Ruth", "Ruth"},
    {"1Sm", "1 Samuel"}, {"2Sm", "2 Samuel"}, {"1Ki", "1 Kings"}, {"2Ki", "2 Kings"},
    {"1Chr", "1 Chronicles"}, {"2Chr", "2 Chronicles"}, {"Ezra", "Ezra"}, {"Neh", "Nehemiah"},
    {"Est", "Esther"}, {"Job", "Job"}, {"Psa", "Psalms"}, {"Prv", "Proverbs"},
    {"Eccl", "Ecclesiastes"}, {"SSol", "Song of Solomon"}, {"Isa", "Isaiah"}, {"Jer", "Jeremiah"},
    {"Lam", "Lamentations"}, {"Eze", "Ezekiel"}, {"Dan", "Daniel"}, {"Hos", "Hosea"},
    {"Joel", "Joel"}, {"Amos", "Amos"}, {"Obad", "Obadiah"}, {"Jonah", "Jonah"},
    {"Mic", "Micah"}, {"Nahum", "Nahum"}, {"Hab", "Habakkuk"}, {"Zep", "Zephaniah"},
    {"Hag", "Haggai"}, {"Zec", "Zechariah"}, {"Mal", "Malachi"}, {"Mat", "Matthew"},
    {"Mark", "Mark"}, {"Luke", "Luke"}, {"John", "John"}, {"Acts", "Acts"},
    {"Rom", "Romans"}, {"1Cor", "1 Corinthians"}, {"2Cor", "2 Corinthians"}, {"Gal", "Galatians"},
    {"Eph", "Ephesians"}, {"Phi", "Philippians"}, {"Col", "Colossians"}, {"1Th", "1 Thessalonians"},
    {"2Th", "2 Thessalonians"}, {"1Tim", "1 Timothy"}, {"2Tim", "2 Timothy"}, {"Titus", "Titus"},
    {"Phmn", "Philemon"}, {"Heb", "Hebrews"}, {"Jas", "James"}, {"1Pet", "1 Peter"},
    {"2Pet", "2 Peter"}, {"1Jn", "1 John"}, {"2Jn", "2 John"}, {"3Jn", "3 John"},
    {"Jude", "Jude"}, {"Rev", "Revelation"},
}};

const char* kInstallHint =
    "the built-in corpus needs Debian's bible-kjv and bible-kjv-text packages "
    "(apt-get install bible-kjv bible-kjv-text; scripts/setup.sh installs them)";

bool executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string run_program(const std::string& program) {
  // -f turns pretty-printing off: one "Ref text" line per verse; the range is the whole text.
  std::string cmd = shell_quote(program) + " -f Gen1:1-Rev22:21 </dev/null 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  AMOR_CHECK(f != nullptr, "{}: cannot run it: {}", program, kInstallHint);
  std::string out;
  std::array<char, 1 << 16> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  int status = ::pclose(f);
  AMOR_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "{} -f Gen1:1-Rev22:21 failed (status {}): {} ({})", program, status,
             out.substr(0, 200), kInstallHint);
  return out;
}

// "1Sm12:3 text" -> book "1Sm", chapter 12, text. False if the line is not a verse line.
bool parse_verse(const std::string& line, std::string& book, int& chapter, std::string& text) {
  size_t i = 0;
  if (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  size_t letters = i;
  while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  if (i == letters) return false;
  book = line.substr(0, i);
  size_t colon = line.find(':', i);
  size_t space = line.find(' ', i);
  if (colon == std::string::npos || space == std::string::npos || colon > space || colon == i) return false;
  for (size_t k = i; k < space; ++k)
    if (k != colon && !std::isdigit(static_cast<unsigned char>(line[k]))) return false;
  chapter = std::stoi(line.substr(i, colon - i));
  text = line.substr(space + 1);
  return !text.empty();
}

}  // namespace

std::string find_bible_program() {
  if (const char* env = std::getenv("AMOR_BIBLE"); env && *env) return executable(env) ? env : "";
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty() && executable(dir + "/bible")) return dir + "/bible";
  }
  return executable("/usr/bin/bible") ? "/usr/bin/bible" : "";
}

std::vector<CorpusDocument> kjv_chapters(const std::string& program_arg) {
  std::string program = program_arg.empty() ? find_bible_program() : program_arg;
  AMOR_CHECK(!program.empty(), "the `bible` program was not found ($AMOR_BIBLE, PATH, /usr/bin/bible): {}",
             kInstallHint);
  AMOR_CHECK(executable(program), "{}: not an executable program: {}", program, kInstallHint);
  std::string out = run_program(program);

  std::vector<CorpusDocument> docs;
  std::stringstream ss(out);
  std::string line, book, text, cur_book;
  int chapter = 0, cur_chapter = 0, book_index = -1;
  size_t verses = 0, lineno = 0;
  while (std::getline(ss, line)) {
    ++lineno;
    if (line.empty()) continue;
    AMOR_CHECK(parse_verse(line, book, chapter, text),
               "{}: unexpected output line {}: '{}' (expected 'Book1:1 text'; {})", program, lineno,
               line.substr(0, 80), kInstallHint);
    if (book != cur_book) {
      ++book_index;
      AMOR_CHECK(book_index < kBooks && book == kBookNames[book_index].first,
                 "{}: output line {}: book '{}' where '{}' was expected", program, lineno, book,
                 book_index < kBooks ? kBookNames[book_index].first : "(end)");
      cur_book = book;
      cur_chapter = 0;
    }
    if (chapter != cur_chapter) {
      docs.push_back({fmt::format("{} {}", kBookNames[book_index].second, chapter), ""});
      cur_chapter = chapter;
    } else {
      docs.back().text += '\n';
    }
    docs.back().text += text;
    ++verses;
  }
  AMOR_CHECK(book_index == kBooks - 1 && docs.size() == kChapters && verses == kVerses,
             "{}: expected the whole King James Bible (66 books, {} chapters, {} verses) but got {} books, {} "
             "chapters, {} verses",
             program, kChapters, kVerses, book_index + 1, docs.size(), verses);
  return docs;
}

void write_jsonl(const std::vector<CorpusDocument>& docs, const std::string& path) {
  std::string out;
  for (const auto& d : docs) out += "{\"title\":" + json::quote(d.title) + ",\"text\":" + json::quote(d.text) + "}\n";
  shards::write_file_atomically(path, out);
}

}  // namespace amor::corpus
