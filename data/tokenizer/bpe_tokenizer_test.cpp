// BpeTokenizer on small hand-made tokenizer.json / GPT-2 files whose results follow by hand from
// the merge rules: ranks, leftmost ties, ignore_merges, added tokens, BOS/EOS, and every error.
#include "data/tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include "data/json/json.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/test_util.h"

namespace amor {
namespace {

using tokenizer::bytes_to_token;
using tokenizer::testing::expect_error;
using tokenizer::testing::TempDir;
using tokenizer::testing::write_file;
using Ids = std::vector<int32_t>;

json::Value gpt2_pre_tokenizer() {
  return json::Object{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
}

// A tokenizer.json: byte b has id b; extra[k] (raw bytes) has id 256 + k; merges in raw bytes.
struct TinyBpe {
  std::vector<std::string> extra;
  std::vector<std::pair<std::string, std::string>> merges;
  bool pair_format = false, ignore_merges = false;
  json::Value pre_tokenizer = gpt2_pre_tokenizer();
  json::Array added;
  json::Value post_processor = nullptr;

  json::Object model() const {
    json::Object vocab;
    for (int b = 0; b < 256; ++b) vocab.emplace_back(bytes_to_token(std::string(1, char(b))), b);
    for (size_t k = 0; k < extra.size(); ++k)
      vocab.emplace_back(bytes_to_token(extra[k]), static_cast<int64_t>(256 + k));
    json::Array m;
    for (const auto& [a, b] : merges) {
      if (pair_format)
        m.push_back(json::Array{bytes_to_token(a), bytes_to_token(b)});
      else
        m.push_back(bytes_to_token(a) + " " + bytes_to_token(b));
    }
    return json::Object{{"type", "BPE"},        {"dropout", nullptr},
                        {"unk_token", nullptr}, {"ignore_merges", ignore_merges},
                        {"vocab", vocab},       {"merges", m}};
  }
  json::Object root() const {
    return json::Object{{"version", "1.0"},
                        {"added_tokens", added},
                        {"normalizer", nullptr},
                        {"pre_tokenizer", pre_tokenizer},
                        {"post_processor", post_processor},
                        {"decoder", json::Object{{"type", "ByteLevel"}}},
                        {"model", model()}};
  }
};

json::Value added_token(int id, const std::string& content, bool special, bool lstrip = false,
                        bool rstrip = false) {
  return json::Object{{"id", id},          {"content", content}, {"single_word", false},
                      {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", false},
                      {"special", special}};
}

std::unique_ptr<BpeTokenizer> load(const TempDir& dir, const json::Value& root,
                                   const std::string& name = "tokenizer.json") {
  return BpeTokenizer::from_tokenizer_json(write_file(dir.file(name), root.dump()), "tiny");
}

TEST(BpeTokenizer, MergesByRankThenLeftmost) {
  TempDir dir;
  TinyBpe t;
  t.extra = {"he", "ll", "hell", "hello"};  // 256..259
  t.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};
  auto tok = load(dir, t.root());
  EXPECT_EQ(tok->vocab_size(), 260);
  EXPECT_EQ(tok->merge_count(), 4u);
  EXPECT_EQ(tok->encode("hellohello"), (Ids{259, 259}));
  EXPECT_EQ(tok->encode("helo"), (Ids{256, 'l', 'o'}));
  EXPECT_EQ(tok->encode("hello hello"), (Ids{259, ' ', 259}));  // " hello" has no merge with ' '

  // Ranks decide between overlapping pairs.
  TinyBpe r;
  r.extra = {"ab", "bc"};
  r.merges = {{"a", "b"}, {"b", "c"}};
  EXPECT_EQ(load(dir, r.root())->encode("abc"), (Ids{256, 'c'}));
  r.merges = {{"b", "c"}, {"a", "b"}};
  EXPECT_EQ(load(dir, r.root())->encode("abc"), (Ids{'a', 257}));

  // Equal ranks: the leftmost pair first.
  TinyBpe a;
  a.extra = {"aa"};
  a.merges = {{"a", "a"}};
  auto aa = load(dir, a.root());
  EXPECT_EQ(aa->encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(aa->encode("aaaaa"), (Ids{256, 256, 'a'}));
}

TEST(BpeTokenizer, BothMergeFormatsAgree) {
  TempDir dir;
  TinyBpe t;
  t.extra = {"\xC3\xA9t", " \xC3\xA9t", "\xC3\xA9"};  // "ét", " ét", "é"
  t.merges = {{"\xC3", "\xA9"}, {"\xC3\xA9", "t"}, {" ", "\xC3\xA9t"}};
  const Ids strings = load(dir, t.root())->encode("\xC3\xA9t \xC3\xA9t");
  t.pair_format = true;
  EXPECT_EQ(load(dir, t.root())->encode("\xC3\xA9t \xC3\xA9t"), strings);
  EXPECT_EQ(strings, (Ids{256, 257}));
}

TEST(BpeTokenizer, IgnoreMergesTakesWholeVocabularyWords) {
  TempDir dir;
  TinyBpe t;
  t.extra = {"ab", "abc"};
  t.merges = {{"a", "b"}};
  EXPECT_EQ(load(dir, t.root())->encode("abc"), (Ids{256, 'c'}));
  t.ignore_merges = true;
  EXPECT_EQ(load(dir, t.root())->encode("abc abcd"), (Ids{257, ' ', 256, 'c', 'd'}));
}

TEST(BpeTokenizer, AddedAndSpecialTokens) {
  TempDir dir;
  TinyBpe t;
  t.added = {added_token(300, "<|x|>", true), added_token(301, "<|y|>", false),
             added_token(302, "<a>", false), added_token(303, "<a>b", false)};
  auto tok = load(dir, t.root());
  EXPECT_EQ(tok->vocab_size(), 304);
  // Special tokens are text unless asked for; other added tokens always match.
  EXPECT_EQ(tok->encode("a<|x|>b<|y|>"), (Ids{'a', '<', '|', 'x', '|', '>', 'b', 301}));
  EXPECT_EQ(tok->encode("a<|x|>b<|y|>", {.special_tokens = true}), (Ids{'a', 300, 'b', 301}));
  EXPECT_EQ(tok->encode("<a>bc<a>c"), (Ids{303, 'c', 302, 'c'}));  // longest match first
  EXPECT_TRUE(tok->is_special(300));
  EXPECT_FALSE(tok->is_special(301));
  EXPECT_FALSE(tok->is_special('a'));
  EXPECT_EQ(tok->special_id("<|y|>"), 301);
  EXPECT_EQ(tok->special_id("<|z|>"), -1);
}

TEST(BpeTokenizer, LstripAndRstripTrimWhitespaceBesideAddedTokens) {
  TempDir dir;
  TinyBpe t;
  t.added = {added_token(300, "[M]", false, /*lstrip=*/true),
             added_token(301, "[N]", false, false, /*rstrip=*/true)};
  auto tok = load(dir, t.root());
  EXPECT_EQ(tok->encode("a  [M]  b"), (Ids{'a', 300, ' ', ' ', 'b'}));
  EXPECT_EQ(tok->encode("a  [N]  b"), (Ids{'a', ' ', ' ', 301, 'b'}));
  EXPECT_EQ(tok->encode("a \xE3\x80\x80[M]"), (Ids{'a', 300}));  // U+3000 is whitespace too
}

TEST(BpeTokenizer, DecodeIsTheInverse) {
  TempDir dir;
  TinyBpe t;
  t.extra = {"he", "ll"};
  t.merges = {{"h", "e"}, {"l", "l"}};
  t.added = {added_token(300, "<|x|>", true), added_token(301, "<|y|>", false)};
  auto tok = load(dir, t.root());
  for (const std::string& s :
       std::vector<std::string>{"hello, world\n", "", "\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
                                "<|x|>he<|y|>", std::string("nul\0byte", 8)}) {
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
    EXPECT_EQ(tok->decode(tok->encode(s, {.special_tokens = true})), s);
  }
  EXPECT_EQ(tok->decode(Ids{300, 256, 301}, /*skip_special=*/true), "he<|y|>");
  EXPECT_EQ(tok->token_bytes(' '), " ");
  EXPECT_EQ(tok->token_bytes(257), "ll");
  expect_error([&] { tok->token_bytes(270); }, {"tokenizer 'tiny'", "id 270 is not a token"});
  expect_error([&] { tok->decode(Ids{-1}); }, {"id -1 is not a token"});
  expect_error([&] { tok->decode(Ids{302}); }, {"id 302", "vocabulary size 302"});
}

TEST(BpeTokenizer, InvalidUtf8IsReadAsReplacementCharacters) {
  TempDir dir;
  auto tok = load(dir, TinyBpe{}.root());
  EXPECT_EQ(tok->encode("a\xFF\xC3"), tok->encode("a\xEF\xBF\xBD\xEF\xBF\xBD"));
}

TEST(BpeTokenizer, BosEosFromConfigTemplateOrNames) {
  TempDir dir;
  TinyBpe t;
  t.added = {added_token(300, "<s>", true), added_token(301, "</s>", true),
             added_token(302, "<|endoftext|>", true)};
  auto named = load(dir, t.root(), "a/tokenizer.json");
  EXPECT_EQ(named->bos_id(), 300);  // "<s>" ranks before "<|endoftext|>" among known names
  EXPECT_EQ(named->eos_id(), 301);

  t.added = {added_token(300, "<|endoftext|>", true)};
  auto gpt2_like = load(dir, t.root(), "b/tokenizer.json");
  EXPECT_EQ(gpt2_like->bos_id(), 300);
  EXPECT_EQ(gpt2_like->eos_id(), 300);

  t.added = {added_token(300, "<x>", true), added_token(301, "<y>", true)};
  auto none = load(dir, t.root(), "c/tokenizer.json");
  EXPECT_EQ(none->bos_id(), -1);
  EXPECT_EQ(none->eos_id(), -1);

  json::Value special = json::Object{{"SpecialToken", json::Object{{"id", "<y>"}, {"type_id", 0}}}};
  json::Value seq = json::Object{{"Sequence", json::Object{{"id", "A"}, {"type_id", 0}}}};
  json::Value start = json::Object{{"SpecialToken", json::Object{{"id", "<x>"}, {"type_id", 0}}}};
  t.post_processor =
      json::Object{{"type", "TemplateProcessing"}, {"single", json::Array{start, seq, special}}};
  auto templ = load(dir, t.root(), "d/tokenizer.json");
  EXPECT_EQ(templ->bos_id(), 300);
  EXPECT_EQ(templ->eos_id(), 301);

  // tokenizer_config.json beside the file decides (string and AddedToken-object forms).
  write_file(dir.file("e/tokenizer_config.json"),
             R"({"bos_token": {"__type": "AddedToken", "content": "<y>"}, "eos_token": "<x>"})");
  auto cfg = load(dir, t.root(), "e/tokenizer.json");
  EXPECT_EQ(cfg->bos_id(), 301);
  EXPECT_EQ(cfg->eos_id(), 300);

  write_file(dir.file("f/tokenizer_config.json"), R"({"bos_token": "<nope>"})");
  expect_error([&] { load(dir, t.root(), "f/tokenizer.json"); },
               {"f/tokenizer_config.json key 'bos_token'", "'<nope>'", "not a token"});
  write_file(dir.file("g/tokenizer_config.json"), "{\n  \"bos_token\": \n}");
  expect_error([&] { load(dir, t.root(), "g/tokenizer.json"); }, {"g/tokenizer_config.json:3:1:"});
}

// Loads root written to a fresh tokenizer.json and expects an error with these fragments.
void expect_load_error(const json::Value& root, std::initializer_list<std::string> fragments) {
  TempDir dir;
  expect_error([&] { load(dir, root); }, fragments);
}

json::Object with(json::Object root, const std::string& key, json::Value v) {
  for (auto& [k, val] : root)
    if (k == key) val = std::move(v);
  return root;
}

json::Object vocab_of(const TinyBpe& t) {
  const json::Object model = t.model();
  return model[4].second.as_object();
}

json::Object with_model(const TinyBpe& t, const std::string& key, json::Value v) {
  return with(t.root(), "model", with(t.model(), key, std::move(v)));
}

TEST(BpeTokenizerErrors, FilesAndJson) {
  TempDir dir;
  expect_error([&] { BpeTokenizer::from_tokenizer_json(dir.file("missing.json"), "x"); },
               {"missing.json", "no such tokenizer.json file"});
  const std::string bad =
      write_file(dir.file("bad.json"), "{\n  \"model\": {\n    \"vocab\": [1,]\n}");
  expect_error([&] { BpeTokenizer::from_tokenizer_json(bad, "x"); }, {"bad.json:3:"});
  expect_load_error(json::Array{}, {"key '<top level>': expected an object, got an array"});
}

TEST(BpeTokenizerErrors, NotByteLevelBpe) {
  TinyBpe t;
  expect_load_error(with_model(t, "type", "WordPiece"),
                    {"tokenizer.json", "key 'model.type' is 'WordPiece'", "only byte-level BPE"});
  expect_load_error(with(t.root(), "pre_tokenizer", nullptr), {"not a byte-level BPE tokenizer"});
  expect_load_error(
      with(t.root(), "pre_tokenizer", json::Object{{"type", "Metaspace"}, {"replacement", "_"}}),
      {"key 'pre_tokenizer.type' is 'Metaspace'", "supported pre-tokenizers"});
  json::Value split = json::Object{{"type", "Split"},
                                   {"pattern", json::Object{{"Regex", "\\s+"}}},
                                   {"behavior", "Isolated"},
                                   {"invert", false}};
  expect_load_error(with(t.root(), "pre_tokenizer", split), {"has no ByteLevel step"});
  expect_load_error(with(t.root(), "normalizer", json::Object{{"type", "NFC"}}),
                    {"key 'normalizer' is 'NFC'", "not supported"});
  json::Object vocab = vocab_of(t);
  vocab.emplace_back("\xE2\x96\x81the", 256);  // SentencePiece's word marker
  expect_load_error(with_model(t, "vocab", vocab),
                    {"'\xE2\x96\x81the' (id 256)", "not a byte-level BPE vocabulary"});
  json::Object no_newline;
  for (const auto& [k, v] : vocab_of(t))
    if (k != bytes_to_token("\n")) no_newline.emplace_back(k, v);
  expect_load_error(with_model(t, "vocab", no_newline), {"no token for byte 0x0A"});
}

TEST(BpeTokenizerErrors, BadFields) {
  TinyBpe t;
  t.extra = {"ab"};
  t.merges = {{"a", "b"}};
  expect_load_error(with_model(t, "merges", json::Array{"a b", "ab zz"}),
                    {"key 'model.merges[1]'", "'zz' is not in the vocabulary"});
  expect_load_error(with_model(t, "merges", json::Array{"b a"}),
                    {"key 'model.merges[0]'", "merged token 'ba' is not in the vocabulary"});
  expect_load_error(with_model(t, "merges", json::Array{"ab"}),
                    {"key 'model.merges[0]' is 'ab'", "two tokens separated by one space"});
  expect_load_error(with_model(t, "merges", json::Array{json::Array{"a"}}),
                    {"key 'model.merges[0]' is [\"a\"]", "pair of two token strings"});
  expect_load_error(
      with_model(t, "merges", json::Array{3}),
      {"key 'model.merges[0]': expected a string or a pair of strings, got a number"});
  expect_load_error(with_model(t, "vocab", json::Object{{"a", "x"}}),
                    {"key 'model.vocab.a': expected an integer id, got a string"});
  json::Object dup = vocab_of(t);
  dup.emplace_back("zz", 5);
  expect_load_error(with_model(t, "vocab", dup),
                    {"id 5 is given to both 'zz' and '" + bytes_to_token("\x05") + "'"});
  expect_load_error(with_model(t, "vocab", nullptr),
                    {"key 'model.vocab': expected an object, got null"});
  expect_load_error(with_model(t, "dropout", 0.1), {"BPE dropout is not supported"});
  json::Object sparse = vocab_of(t);
  sparse.emplace_back("zz", 2000000000);
  expect_load_error(with_model(t, "vocab", sparse),
                    {"id 2000000000 is far beyond the 258 tokens listed"});
  json::Value bad_regex = json::Object{
      {"type", "Split"}, {"pattern", json::Object{{"Regex", "([a-"}}}, {"behavior", "Isolated"}};
  json::Value seq = json::Object{{"type", "Sequence"},
                                 {"pretokenizers", json::Array{bad_regex, gpt2_pre_tokenizer()}}};
  expect_load_error(with(t.root(), "pre_tokenizer", seq),
                    {"key 'pre_tokenizer.pretokenizers[0].pattern.Regex'", "cannot compile"});
  json::Value removed = json::Object{
      {"type", "Split"}, {"pattern", json::Object{{"String", " "}}}, {"behavior", "Removed"}};
  expect_load_error(with(t.root(), "pre_tokenizer", removed),
                    {"key 'pre_tokenizer.behavior' is 'Removed'", "only 'Isolated'"});
  json::Value single = added_token(300, "<w>", false);
  for (auto& [k, v] : const_cast<json::Object&>(single.as_object()))
    if (k == "single_word") v = true;
  expect_load_error(with(t.root(), "added_tokens", json::Array{single}),
                    {"key 'added_tokens[0].single_word' is true"});
  expect_load_error(with(t.root(), "added_tokens",
                         json::Array{added_token(300, "<a>", true), added_token(300, "<b>", true)}),
                    {"id 300 is given to two added tokens ('<a>' and '<b>')"});
  expect_load_error(with(t.root(), "added_tokens", json::Array{added_token(300, "", true)}),
                    {"added token id 300 has empty content"});
}

TEST(BpeTokenizer, SplitStringPatternIsLiteral) {
  TempDir dir;
  TinyBpe t;
  t.extra = {"a.", "a.b"};
  t.merges = {{"a", "."}, {"a.", "b"}};
  // Split on the literal "." (not "any character"), then ByteLevel without its regex.
  json::Value split = json::Object{
      {"type", "Split"}, {"pattern", json::Object{{"String", "."}}}, {"behavior", "Isolated"}};
  t.pre_tokenizer =
      json::Object{{"type", "Sequence"},
                   {"pretokenizers", json::Array{split, json::Object{{"type", "ByteLevel"},
                                                                     {"add_prefix_space", false},
                                                                     {"use_regex", false}}}}};
  EXPECT_EQ(load(dir, t.root())->encode("a.b"), (Ids{'a', '.', 'b'}));
  t.pre_tokenizer =
      json::Object{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(load(dir, t.root())->encode("a.b"), (Ids{257}));
}

TEST(BpeTokenizer, Gpt2Files) {
  TempDir dir;
  json::Object enc;
  for (int b = 0; b < 256; ++b) enc.emplace_back(bytes_to_token(std::string(1, char(b))), b);
  enc.emplace_back("he", 256);
  enc.emplace_back(bytes_to_token(" he"), 257);
  enc.emplace_back("<|endoftext|>", 258);
  const std::string encoder = write_file(dir.file("encoder.json"), json::Value(enc).dump());
  const std::string vocab =
      write_file(dir.file("vocab.bpe"), "#version: 0.2\nh e\n" + bytes_to_token(" ") + " he\n");
  auto tok = BpeTokenizer::from_gpt2_files(encoder, vocab);
  EXPECT_EQ(tok->name(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 259);
  EXPECT_EQ(tok->bos_id(), 258);
  EXPECT_EQ(tok->eos_id(), 258);
  EXPECT_EQ(tok->encode("hehe he"), (Ids{256, 256, 257}));
  EXPECT_EQ(tok->encode("he<|endoftext|>", {.special_tokens = true}), (Ids{256, 258}));
  EXPECT_EQ(tok->encode("<|endoftext|>").size(), 13u);  // its 13 bytes: no merge applies

  write_file(vocab, "#version: 0.2\nh e\nh e x\n");
  expect_error([&] { BpeTokenizer::from_gpt2_files(encoder, vocab); },
               {"vocab.bpe:3: expected two tokens", "'h e x'"});
  write_file(vocab, "#version: 0.2\nhe zz\n");
  expect_error([&] { BpeTokenizer::from_gpt2_files(encoder, vocab); },
               {"vocab.bpe:2", "'zz' is not in the vocabulary"});
  expect_error([&] { BpeTokenizer::from_gpt2_files(encoder, dir.file("nope.bpe")); },
               {"nope.bpe: no such file"});
  write_file(encoder, "{\"a\": 1.5}");
  expect_error([&] { BpeTokenizer::from_gpt2_files(encoder, vocab); },
               {"encoder.json: key 'a': expected a non-negative integer id, got 1.5"});
}

}  // namespace
}  // namespace amor
