// The built-in corpus: the King James Bible read through Debian's `bible` program, its jsonl
// export, and scripts/prepare_corpus.sh end to end (export, convert, stats, idempotence).
// Skipped, with the reason, where the bible-kjv packages are not installed (scripts/setup.sh
// installs them, so the test command runs it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "data/corpus/kjv.h"
#include "data/json/json.h"
#include "data/loader/token_dataset.h"
#include "data/shards/shard_stats.h"
#include "data/shards/test_tmpdir.h"
#include "kernels/core/error.h"

namespace amor::corpus {
namespace {

using amor::testing::TempDir;
namespace fs = std::filesystem;

#define SKIP_WITHOUT_BIBLE()                                                                  \
  if (find_bible_program().empty())                                                           \
  GTEST_SKIP() << "Debian's bible-kjv / bible-kjv-text are not installed (scripts/setup.sh " \
                  "installs them)"

template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an amor::Error mentioning '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Kjv, EveryChapterInOrder) {
  SKIP_WITHOUT_BIBLE();
  std::vector<CorpusDocument> docs = kjv_chapters();
  ASSERT_EQ(docs.size(), 1189u);
  EXPECT_EQ(docs.front().title, "Genesis 1");
  EXPECT_EQ(docs.front().text.rfind("In the beginning God created the heaven and the earth.\nAnd the earth was", 0), 0u);
  EXPECT_EQ(docs[49].title, "Genesis 50");
  EXPECT_EQ(docs[50].title, "Exodus 1");
  EXPECT_EQ(docs.back().title, "Revelation 22");
  EXPECT_TRUE(docs.back().text.ends_with("The grace of our Lord Jesus Christ be with you all. Amen."));
  size_t verses = 0, bytes = 0;
  for (const auto& d : docs) {
    verses += static_cast<size_t>(std::count(d.text.begin(), d.text.end(), '\n')) + 1;
    bytes += d.text.size();
    EXPECT_FALSE(d.text.empty()) << d.title;
  }
  EXPECT_EQ(verses, 31102u);
  EXPECT_GT(bytes, 4'000'000u);  // enough text for a small model's loss to fall visibly
  auto psalm = std::find_if(docs.begin(), docs.end(), [](const CorpusDocument& d) { return d.title == "Psalms 23"; });
  ASSERT_NE(psalm, docs.end());
  EXPECT_EQ(psalm->text.rfind("The LORD is my shepherd; I shall not want.", 0), 0u);
}

TEST(Kjv, JsonlExportReadsBack) {
  SKIP_WITHOUT_BIBLE();
  TempDir t("kjv_jsonl");
  std::vector<CorpusDocument> docs = kjv_chapters();
  write_jsonl(docs, t / "kjv.jsonl");
  std::string text = amor::testing::read_file(t / "kjv.jsonl");
  size_t start = 0, n = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    json::Value v = json::parse(std::string_view(text).substr(start, nl - start));
    ASSERT_EQ(v.at("title").as_string(), docs[n].title);
    ASSERT_EQ(v.at("text").as_string(), docs[n].text);
    start = nl + 1;
    ++n;
  }
  EXPECT_EQ(n, docs.size());
}

TEST(Kjv, ProgramProblemsSayWhatToInstall) {
  TempDir t("kjv_bad");
  expect_error([&] { kjv_chapters(t / "no-such-bible"); }, {"not an executable program", "bible-kjv-text"});
  expect_error([&] { kjv_chapters("/bin/false"); }, {"/bin/false -f Gen1:1-Rev22:21 failed"});
  // A program that prints something else than verses.
  std::string fake = t.write("fake-bible", "#!/bin/sh\necho 'Ge1:1 In the beginning'\necho 'garbage here'\n");
  fs::permissions(fake, fs::perms::owner_all);
  expect_error([&] { kjv_chapters(fake); }, {"unexpected output line 2: 'garbage here'"});
  std::string short_bible = t.write("short-bible", "#!/bin/sh\necho 'Ge1:1 In the beginning'\n");
  fs::permissions(short_bible, fs::perms::owner_all);
  expect_error([&] { kjv_chapters(short_bible); }, {"expected the whole King James Bible", "got 1 books, 1 chapters, 1 verses"});
}

// build/data/kjv_test -> build/bin/amor-data (the CMake layout of data/CMakeLists.txt).
std::string amor_data_binary() {
  return (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "bin" / "amor-data").string();
}

TEST(Kjv, PrepareCorpusScriptMakesShardsOnce) {
  SKIP_WITHOUT_BIBLE();
  std::string bin = amor_data_binary();
  ASSERT_TRUE(fs::exists(bin)) << bin << " is not built (ninja amor-data)";
  TempDir t("kjv_prepare");
  std::string script = std::string(AMOR_SOURCE_DIR) + "/scripts/prepare_corpus.sh";
  std::string cmd = "bash '" + script + "' --amor-data '" + bin + "' '" + (t / "kjv") + "' > '" + (t / "log") + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << amor::testing::read_file(t / "log");
  shards::DatasetSummary s = shards::summarize_shards(t / "kjv");
  ASSERT_EQ(s.splits.size(), 2u);
  EXPECT_EQ(s.tokenizer, "byte");
  EXPECT_EQ(s.splits[0].split, "train");
  EXPECT_EQ(s.splits[1].split, "valid");
  EXPECT_EQ(s.splits[0].documents + s.splits[1].documents, 1189u);
  EXPECT_EQ(s.splits[1].documents, 12u);  // chapters 0, 100, ..., 1100
  EXPECT_GT(s.splits[0].tokens, 4'000'000u);
  EXPECT_EQ(data::TokenDataset::open(t / "kjv", "valid").documents(), 12u);
  // Running it again leaves the shards alone.
  auto mtime = fs::last_write_time(t / "kjv/train-00000.tok");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << amor::testing::read_file(t / "log");
  EXPECT_NE(amor::testing::read_file(t / "log").find("already prepared"), std::string::npos);
  EXPECT_EQ(fs::last_write_time(t / "kjv/train-00000.tok"), mtime);
}

}  // namespace
}  // namespace amor::corpus
