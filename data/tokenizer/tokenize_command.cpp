// The `tokenize` command's argument handling, encoding/decoding and throughput report.
#include "data/tokenizer/tokenize_command.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "data/tokenizer/tokenizer.h"
#include "kernels/core/error.h"

namespace amor {

namespace {

constexpr const char* kUsage =
    "usage: tokenize [--tokenizer SPEC] [--special] [--stats] [FILE...]\n"
    "       tokenize [--tokenizer SPEC] --decode [FILE...]\n"
    "  SPEC: byte, gpt2, llama3 (default) or a path to a tokenizer.json; FILE '-' or none: stdin\n"
    "  --special  match special tokens written in the text (<|endoftext|>, ...)\n"
    "  --stats    print bytes, tokens and throughput instead of the ids\n"
    "  --decode   read whitespace-separated ids and print their text\n";

std::string read_input(const std::string& name, std::istream& in) {
  std::stringstream ss;
  if (name == "-") {
    ss << in.rdbuf();
    return ss.str();
  }
  std::ifstream f(name, std::ios::binary);
  AMOR_CHECK(f.good(), "tokenize: {}: cannot open for reading", name);
  ss << f.rdbuf();
  AMOR_CHECK(!f.bad(), "tokenize: {}: read error", name);
  return ss.str();
}

std::vector<int32_t> parse_ids(const std::string& name, const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AMOR_CHECK(used == w.size() && v >= INT32_MIN && v <= INT32_MAX,
               "tokenize: {}: '{}' is not a token id", name, w);
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace

int tokenize_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                     std::ostream& err) {
  std::string spec = "llama3";
  bool special = false, stats = false, decode = false;
  std::vector<std::string> files;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--tokenizer" && i + 1 < args.size()) {
      spec = args[++i];
    } else if (a == "--special") {
      special = true;
    } else if (a == "--stats") {
      stats = true;
    } else if (a == "--decode") {
      decode = true;
    } else if (a == "-h" || a == "--help") {
      out << kUsage;
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      err << "tokenize: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (decode && (special || stats)) {
    err << "tokenize: --decode takes no --special or --stats\n" << kUsage;
    return 2;
  }
  if (files.empty()) files.push_back("-");
  try {
    const auto tok = make_tokenizer(spec);
    for (const std::string& f : files) {
      const std::string text = read_input(f, in);
      if (decode) {
        out << tok->decode(parse_ids(f, text));
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<int32_t> ids = tok->encode(text, {.special_tokens = special});
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (stats) {
        out << fmt::format("{}: {} bytes, {} tokens ({:.2f} bytes/token), {:.3f} s, {:.1f} MB/s\n",
                           f, text.size(), ids.size(),
                           ids.empty() ? 0.0 : double(text.size()) / ids.size(), s,
                           s > 0 ? text.size() / s / 1e6 : 0.0);
      } else {
        std::string line;
        for (size_t k = 0; k < ids.size(); ++k) {
          if (k) line += ' ';
          line += std::to_string(ids[k]);
        }
        out << line << '\n';
      }
    }
  } catch (const Error& e) {
    err << e.what() << '\n';
    return 1;
  }
  return 0;
}

}  // namespace amor
