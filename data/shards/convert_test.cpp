// amor-data convert and stats on small temporary corpora: text files, folders and jsonl, the
// validation split, shard rollover, every bad-input case (with nothing left half-written), and the
// command line's output and exit status.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "data/shards/amor_data_cli.h"
#include "data/shards/convert.h"
#include "data/shards/shard_files.h"
#include "data/shards/shard_reader.h"
#include "data/shards/shard_stats.h"
#include "data/shards/shard_writer.h"
#include "data/shards/test_tmpdir.h"
#include "kernels/core/error.h"

namespace amor::shards {
namespace {

using amor::testing::TempDir;
namespace fs = std::filesystem;

constexpr int32_t kEos = 256;  // the byte tokenizer's (data/tokenizer/byte_tokenizer.h)

template <class F>
void expect_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an amor::Error mentioning '" << *parts.begin() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// What the byte tokenizer must produce for these documents: their bytes, each followed by EOS.
std::vector<int32_t> byte_stream(const std::vector<std::string>& docs) {
  std::vector<int32_t> v;
  for (const std::string& d : docs) {
    for (unsigned char c : d) v.push_back(c);
    v.push_back(kEos);
  }
  return v;
}

std::vector<int32_t> read_split(const std::string& dir, const std::string& split) {
  std::vector<int32_t> all;
  for (const std::string& p : list_shard_files(dir, split)) {
    TokenShard s(p);
    std::vector<int32_t> v(s.size());
    s.read(0, s.size(), v.data());
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

size_t count_entries(const std::string& dir) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += (void(e), 1);
  return n;
}

ConvertOptions options(std::vector<std::string> inputs, std::string out, double valid = 0) {
  ConvertOptions o;
  o.inputs = std::move(inputs);
  o.out_dir = std::move(out);
  o.valid_fraction = valid;
  return o;
}

const TokenEncoder& byte_enc() {
  static const TokenEncoder e = make_encoder("byte");
  return e;
}

TEST(Convert, ByteEncoderIsTheByteTokenizer) {
  EXPECT_EQ(byte_enc().name, "byte");
  EXPECT_EQ(byte_enc().eos_id, static_cast<uint32_t>(kEos));
  EXPECT_EQ(byte_enc().encode("A\xc3\xa9"), (std::vector<int32_t>{65, 0xc3, 0xa9}));
}

TEST(Convert, TextFilesFoldersAndJsonlInOrder) {
  TempDir t("conv_mixed");
  std::string a = t.write("a.txt", "\xef\xbb\xbfHello, world.\nSecond line.\n");  // BOM dropped
  t.write("corpus/b.txt", "b in a folder");
  t.write("corpus/sub/c.md", "c, deeper: \xe2\x82\xac");
  t.write("corpus/.hidden.txt", "never read");
  t.write("corpus/.git/x", "never read either");
  t.write("corpus/shards/train-00000.tok", "output of an earlier conversion, not input");
  t.write("corpus/d.jsonl",
          "{\"text\": \"first \\\"quoted\\\" \\u00e9\", \"id\": 1}\n\n"
          "{\"id\": 2, \"text\": \"second\\nline\"}\r\n"
          "{\"text\": \"\"}\n");  // empty: skipped
  ConvertStats st = convert_corpus(options({a, t / "corpus"}, t / "out"), byte_enc());
  // Folder contents sorted by path: corpus/b.txt, corpus/d.jsonl, corpus/sub/c.md.
  std::vector<std::string> docs = {"Hello, world.\nSecond line.\n", "b in a folder", "first \"quoted\" \xc3\xa9",
                                   "second\nline", "c, deeper: \xe2\x82\xac"};
  EXPECT_EQ(read_split(t / "out", "train"), byte_stream(docs));
  EXPECT_TRUE(list_shard_files(t / "out", "valid").empty());
  EXPECT_EQ(st.train.documents, 5u);
  EXPECT_EQ(st.train.tokens, byte_stream(docs).size());
  EXPECT_EQ(st.empty_documents, 1u);
  EXPECT_EQ(st.input_files, 4u);
  EXPECT_EQ(count_entries(t / "out"), 1u);  // train-00000.tok and no temporaries
}

TEST(Convert, ValidationTakesEveryKthDocumentStartingWithTheFirst) {
  EXPECT_TRUE(is_validation_document(0, 0.01));
  EXPECT_FALSE(is_validation_document(1, 0.01));
  EXPECT_FALSE(is_validation_document(99, 0.01));
  EXPECT_TRUE(is_validation_document(100, 0.01));
  EXPECT_FALSE(is_validation_document(0, 0.0));
  int n = 0;
  for (uint64_t i = 0; i < 1000; ++i) n += is_validation_document(i, 0.25);
  EXPECT_EQ(n, 250);

  TempDir t("conv_valid");
  std::string jsonl;
  std::vector<std::string> train, valid;
  for (int i = 0; i < 250; ++i) {
    std::string d = "document " + std::to_string(i);
    jsonl += "{\"text\": \"" + d + "\"}\n";
    (i % 100 == 0 ? valid : train).push_back(d);
  }
  t.write("docs.jsonl", jsonl);
  ConvertStats st = convert_corpus(options({t / "docs.jsonl"}, t / "out", 0.01), byte_enc());
  EXPECT_EQ(read_split(t / "out", "valid"), byte_stream(valid));
  EXPECT_EQ(read_split(t / "out", "train"), byte_stream(train));
  EXPECT_EQ(st.valid.documents, 3u);
  EXPECT_EQ(st.train.documents, 247u);
}

TEST(Convert, ShardsRollOverAtDocumentBoundaries) {
  TempDir t("conv_roll");
  std::vector<std::string> docs;
  std::string jsonl;
  for (int i = 0; i < 40; ++i) {
    docs.push_back(std::string(static_cast<size_t>(5 + i % 7), static_cast<char>('a' + i % 26)));
    jsonl += "{\"text\": \"" + docs.back() + "\"}\n";
  }
  t.write("docs.jsonl", jsonl);
  ConvertOptions o = options({t / "docs.jsonl"}, t / "out");
  o.shard_tokens = 32;
  ConvertStats st = convert_corpus(o, byte_enc());
  std::vector<std::string> files = list_shard_files(t / "out", "train");
  ASSERT_GT(files.size(), 5u);
  EXPECT_EQ(st.train.files.size(), files.size());
  uint64_t docs_seen = 0;
  for (const std::string& f : files) {
    TokenShard s(f);
    EXPECT_LE(s.size(), 32u) << f;
    EXPECT_EQ(s.at(s.size() - 1), kEos) << f << " ends inside a document";
    docs_seen += s.header().document_count;
  }
  EXPECT_EQ(docs_seen, 40u);
  EXPECT_EQ(read_split(t / "out", "train"), byte_stream(docs));
}

TEST(Convert, BadJsonlLinesNameFileAndLineAndLeaveNothing) {
  TempDir t("conv_badjsonl");
  std::string good = "{\"text\": \"fine\"}\n";
  struct Case {
    std::string line;
    std::vector<std::string> message;
  };
  std::vector<Case> cases = {
      {"{\"id\": 7, \"body\": \"x\"}", {"bad.jsonl:3: no 'text' field (the object has: id, body)"}},
      {"{\"text\": 12}", {"bad.jsonl:3: field 'text' must be a string, got 12"}},
      {"[\"text\"]", {"bad.jsonl:3: expected a JSON object with a 'text' field"}},
      {"{\"text\": \"unterminated}", {"bad.jsonl:3:", "unterminated string"}},
      {"{\"text\": \"x\"} trailing", {"bad.jsonl:3:15: unexpected text after the JSON value"}},
      {"{\"text\": \"caf\xe9\"}", {"bad.jsonl:3: not UTF-8 text (byte 0xe9 at column 14)"}},
  };
  for (const Case& c : cases) {
    std::string bad = t.write("bad.jsonl", good + "\n" + c.line + "\n" + good);
    std::string out = t / "out";
    expect_error([&] { convert_corpus(options({t.write("first.txt", "text"), bad}, out), byte_enc()); }, {c.message[0]});
    for (size_t i = 1; i < c.message.size(); ++i)
      expect_error([&] { convert_corpus(options({bad}, out), byte_enc()); }, {c.message[i]});
    EXPECT_FALSE(fs::exists(out)) << "a failed conversion left its output folder: " << c.line;
  }
  // An output folder that existed before is kept, and left empty.
  fs::create_directories(t / "existing");
  expect_error([&] { convert_corpus(options({t / "bad.jsonl"}, t / "existing"), byte_enc()); }, {"bad.jsonl:3:"});
  EXPECT_EQ(count_entries(t / "existing"), 0u);
}

TEST(Convert, OtherFieldName) {
  TempDir t("conv_field");
  t.write("d.jsonl", "{\"content\": \"abc\"}\n");
  ConvertOptions o = options({t / "d.jsonl"}, t / "out");
  o.jsonl_field = "content";
  convert_corpus(o, byte_enc());
  EXPECT_EQ(read_split(t / "out", "train"), byte_stream({"abc"}));
}

TEST(Convert, TextFilesSplitIntoParagraphsOrLines) {
  TempDir t("conv_split");
  t.write("book.txt", "\n\nFirst paragraph,\r\nstill first.\n\n  \t\nSecond.\nThird line\n\n\nLast");
  ConvertOptions o = options({t / "book.txt"}, t / "para");
  o.text_docs = TextDocs::Paragraphs;
  ConvertStats st = convert_corpus(o, byte_enc());
  EXPECT_EQ(read_split(t / "para", "train"),
            byte_stream({"First paragraph,\nstill first.", "Second.\nThird line", "Last"}));
  EXPECT_EQ(st.train.documents, 3u);
  o = options({t / "book.txt"}, t / "lines");
  o.text_docs = TextDocs::Lines;
  convert_corpus(o, byte_enc());
  EXPECT_EQ(read_split(t / "lines", "train"),
            byte_stream({"First paragraph,", "still first.", "Second.", "Third line", "Last"}));
  expect_error([] { parse_text_docs("chapters"); }, {"--text-docs: 'chapters' is not one of file, paragraphs, lines"});
  // Errors in a split file still name its line.
  t.write("bad.txt", "fine\n\nbad \xff here\n");
  o = options({t / "bad.txt"}, t / "bad");
  o.text_docs = TextDocs::Paragraphs;
  expect_error([&] { convert_corpus(o, byte_enc()); }, {"bad.txt:3: not UTF-8 text (byte 0xff at column 5)"});
}

TEST(Convert, MissingUnreadableAndNonFileInputs) {
  TempDir t("conv_missing");
  std::string a = t.write("a.txt", "text");
  expect_error([&] { convert_corpus(options({a, t / "nope.txt"}, t / "out"), byte_enc()); },
               {"nope.txt: no such file or directory"});
  EXPECT_FALSE(fs::exists(t / "out"));
  ASSERT_EQ(::mkfifo((t / "fifo").c_str(), 0600), 0);
  expect_error([&] { convert_corpus(options({t / "fifo"}, t / "out"), byte_enc()); },
               {"fifo: not a regular file or directory"});
  EXPECT_FALSE(fs::exists(t / "out"));
  std::string tok = t.write("x.tok", "AMORTOK");
  expect_error([&] { convert_corpus(options({tok}, t / "out"), byte_enc()); }, {"x.tok: a token shard, not text"});
  std::string bin = t.write("bin/data.bin", std::string("ok line\n\x01\x02\xff\xfe", 12));
  expect_error([&] { convert_corpus(options({t / "bin"}, t / "out"), byte_enc()); },
               {"data.bin:2: not UTF-8 text (byte 0xff at column 3)"});
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(Convert, EmptyCorpus) {
  TempDir t("conv_empty");
  fs::create_directories(t / "nothing");
  expect_error([&] { convert_corpus(options({t / "nothing"}, t / "out"), byte_enc()); },
               {"empty corpus: no files found in", "nothing"});
  t.write("blank/a.txt", "");
  t.write("blank/b.jsonl", "\n\n{\"text\": \"\"}\n");
  expect_error([&] { convert_corpus(options({t / "blank"}, t / "out"), byte_enc()); },
               {"empty corpus: the 2 input file(s) hold no text", "a.txt"});
  EXPECT_FALSE(fs::exists(t / "out"));
  t.write("one.txt", "a single document");
  expect_error([&] { convert_corpus(options({t / "one.txt"}, t / "out", 0.5), byte_enc()); },
               {"only 1 document(s): none left for training", "--valid-fraction 0.5", "--text-docs"});
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(Convert, ExistingShardsAreRefusedUnlessOverwrite) {
  TempDir t("conv_over");
  std::string jsonl;
  for (int i = 0; i < 30; ++i) jsonl += "{\"text\": \"doc " + std::to_string(i) + "\"}\n";
  t.write("many.jsonl", jsonl);
  ConvertOptions o = options({t / "many.jsonl"}, t / "out");
  o.shard_tokens = 20;
  convert_corpus(o, byte_enc());
  size_t many = list_shard_files(t / "out", "train").size();
  ASSERT_GT(many, 2u);
  t.write("small.txt", "small");
  expect_error([&] { convert_corpus(options({t / "small.txt"}, t / "out"), byte_enc()); },
               {"already holds token shards (train-00000.tok", "--overwrite"});
  EXPECT_EQ(list_shard_files(t / "out", "train").size(), many);  // untouched
  ConvertOptions again = options({t / "small.txt"}, t / "out");
  again.overwrite = true;
  convert_corpus(again, byte_enc());
  EXPECT_EQ(list_shard_files(t / "out", "train").size(), 1u);  // stale train-00001.. removed
  EXPECT_EQ(read_split(t / "out", "train"), byte_stream({"small"}));
  EXPECT_EQ(count_entries(t / "out"), 1u);
}

TEST(Convert, ProgressReportsReachTheTotal) {
  TempDir t("conv_prog");
  t.write("a.txt", "abc");
  t.write("b.txt", "defgh");
  ConvertOptions o = options({t / "a.txt", t / "b.txt"}, t / "out");
  ConvertProgress last;
  int calls = 0;
  o.progress = [&](const ConvertProgress& p) { last = p, ++calls; };
  convert_corpus(o, byte_enc());
  EXPECT_GE(calls, 1);
  EXPECT_EQ(last.bytes_total, 8u);
  EXPECT_EQ(last.bytes_done, 8u);
  EXPECT_EQ(last.documents, 2u);
  EXPECT_EQ(last.tokens, 10u);
}

TEST(Stats, CountsAndChecksEveryShard) {
  TempDir t("stats");
  write_shard(t / "train-00000.tok", {"byte", 259, 256}, {{1, 2}, {3}});
  write_shard(t / "train-00001.tok", {"byte", 259, 256}, {{4, 5, 6, 7}});
  write_shard(t / "valid-00000.tok", {"byte", 259, 256}, {{8}});
  DatasetSummary s = summarize_shards(t.str());
  ASSERT_EQ(s.splits.size(), 2u);
  EXPECT_EQ(s.splits[0].split, "train");
  EXPECT_EQ(s.splits[0].shards, 2u);
  EXPECT_EQ(s.splits[0].documents, 3u);
  EXPECT_EQ(s.splits[0].tokens, 10u);
  EXPECT_EQ(s.splits[1].split, "valid");
  EXPECT_EQ(s.splits[1].tokens, 2u);
  EXPECT_EQ(s.tokenizer, "byte");
  EXPECT_EQ(summarize_shards(t / "valid-00000.tok").splits[0].documents, 1u);
}

TEST(Stats, BadDatasets) {
  TempDir t("stats_bad");
  expect_error([&] { summarize_shards(t.str()); }, {t.str(), "no token shards here"});
  expect_error([&] { summarize_shards(t / "missing"); }, {"missing: no such file or directory"});
  write_shard(t / "train-00000.tok", {"byte", 259, 256}, {{1}});
  write_shard(t / "train-00002.tok", {"byte", 259, 256}, {{1}});
  expect_error([&] { summarize_shards(t.str()); }, {"shard train-00001.tok is missing"});
  write_shard(t / "train-00001.tok", {"gpt2", 50257, 50256}, {{1}});
  expect_error([&] { summarize_shards(t.str()); }, {"train-00001.tok: tokenizer 'gpt2'", "differs from"});
  // A header whose document count disagrees with the EOS ids in the tokens.
  TempDir u("stats_count");
  write_shard(u / "a.tok", {"byte", 259, 256}, {{1, 2}, {3}});
  std::string b = amor::testing::read_file(u / "a.tok");
  b[32] = 5;  // document_count (offset 32, little-endian)
  u.write("a.tok", b);
  expect_error([&] { summarize_shards(u / "a.tok"); }, {"a.tok", "header says 5 documents but the tokens hold 2 EOS"});
}

// The command line, run in-process.
struct Cli {
  int code;
  std::string out, err;
};
Cli run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = amor_data_main(args, out, err, false);
  return {code, out.str(), err.str()};
}

TEST(Cli, ConvertThenStats) {
  TempDir t("cli");
  t.write("in/a.txt", "alpha beta");
  t.write("in/b.txt", "gamma");
  t.write("in/c.jsonl", "{\"text\": \"delta\"}\n{\"text\": \"epsilon\"}\n");
  Cli c = run({"convert", "--tokenizer", "byte", "--out", t / "out", "--valid-fraction", "0.25", t / "in"});
  ASSERT_EQ(c.code, 0) << c.err;
  // 4 documents, document 0 ("alpha beta") to valid: train = gamma, delta, epsilon.
  EXPECT_NE(c.out.find("tokenizer      byte (vocabulary 259)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("train          1            3             20          6.7"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("valid          1            1             11         11.0"), std::string::npos) << c.out;
  EXPECT_NE(c.err.find("convert: 100%"), std::string::npos) << c.err;
  Cli s = run({"stats", t / "out"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("tokenizer byte (vocabulary 259, EOS 256, 2-byte tokens)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("train                  1            3             20          6.7"), std::string::npos)
      << s.out;
  Cli q = run({"convert", "--tokenizer=byte", "--out", t / "q", "--quiet", "--shard-tokens", "1K", "--valid-fraction",
               "0", t / "in/b.txt"});
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.err, "");
}

TEST(Cli, UsageErrorsExitTwo) {
  TempDir t("cli_usage");
  std::string a = t.write("a.txt", "x");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"convert", "--out", t / "o", a},
           {"convert", "--tokenizer", "byte", a},
           {"convert", "--tokenizer", "byte", "--out", t / "o"},
           {"convert", "--tokenizer", "byte", "--out", t / "o", "--valid-fraction", "1.5", a},
           {"convert", "--tokenizer", "byte", "--out", t / "o", "--shard-tokens", "lots", a},
           {"convert", "--tokenizer", "byte", "--out", t / "o", "--bogus", a},
           {"convert", "--tokenizer", "byte", "--out", t / "o", "--text-docs", "chapters", a},
           {"convert", "--tokenizer", "byte", "--out"},
           {"stats"},
       }) {
    Cli c = run(args);
    EXPECT_EQ(c.code, 2) << fmt::format("{}", fmt::join(args, " ")) << "\n" << c.err;
    EXPECT_FALSE(c.err.empty());
  }
  EXPECT_FALSE(fs::exists(t / "o"));
  EXPECT_NE(run({"convert", "--tokenizer", "byte", "--out", t / "o", "--valid-fraction", "1.5", a})
                .err.find("--valid-fraction: expected a number in [0, 1), got '1.5'"),
            std::string::npos);
  Cli h = run({"--help"});
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("amor-data convert --tokenizer SPEC --out DIR"), std::string::npos);
}

TEST(Cli, DataErrorsExitOneWithTheMessage) {
  TempDir t("cli_err");
  t.write("bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": \"oops\"}\n");
  Cli c = run({"convert", "--tokenizer", "byte", "--out", t / "o", t / "bad.jsonl"});
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("amor-data convert: error: " + (t / "bad.jsonl") + ":2: no 'text' field"), std::string::npos)
      << c.err;
  EXPECT_FALSE(fs::exists(t / "o"));
  Cli u = run({"convert", "--tokenizer", "klingon", "--out", t / "o", t / "bad.jsonl"});
  EXPECT_EQ(u.code, 1);
  EXPECT_NE(u.err.find("unknown tokenizer 'klingon'"), std::string::npos) << u.err;
  Cli s = run({"stats", t / "bad.jsonl"});
  EXPECT_EQ(s.code, 1);
  EXPECT_NE(s.err.find("not a token shard"), std::string::npos) << s.err;
}

}  // namespace
}  // namespace amor::shards
