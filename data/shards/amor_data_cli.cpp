// The `amor-data` command: argument parsing and output for convert, stats and export-kjv
// (see amor_data_cli.h).
#include "data/shards/amor_data_cli.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "data/corpus/kjv.h"
#include "data/shards/convert.h"
#include "data/shards/shard_stats.h"
#include "data/shards/token_encoder.h"
#include "kernels/core/error.h"

namespace amor::shards {
namespace {

const char* kUsage = R"(usage:
  amor-data convert --tokenizer SPEC --out DIR [options] INPUT...
      Tokenises text into DIR/train-NNNNN.tok and DIR/valid-NNNNN.tok, then prints statistics.
      INPUT: a text file (one document), a .jsonl file (one document per line, in a string
      field), or a folder (every file below it, sorted, read by extension).
      --tokenizer SPEC        byte | gpt2 | llama3 | path/to/tokenizer.json
      --out DIR               output folder (created if missing)
      --valid-fraction F      share of documents for validation, in [0, 1) (default 0.01)
      --shard-tokens N        tokens per shard before a new one starts (default 100M; K/M/G ok)
      --field NAME            the jsonl field holding the text (default text)
      --text-docs MODE        a text file is one document (file, the default), one per
                              blank-line-separated paragraph (paragraphs), or one per line (lines)
      --overwrite             replace shards already in DIR
      --quiet                 no progress line
  amor-data stats DIR_OR_FILE...
      Checks every shard and prints per split: shards, documents, tokens, tokens per document.
  amor-data export-kjv --out FILE.jsonl
      Writes the built-in corpus (King James Bible, one chapter per line) as jsonl.
)";

struct UsageError : Error {
  using Error::Error;
};

// Options of the form --name VALUE; flags are listed in `flags`. Everything else is positional.
struct Parsed {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
  bool has(const std::string& k) const { return values.count(k) > 0; }
};

Parsed parse(const std::vector<std::string>& args, const std::vector<std::string>& with_value,
             const std::vector<std::string>& flags, const std::string& cmd) {
  Parsed p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      p.positional.insert(p.positional.end(), args.begin() + static_cast<ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a.rfind("--", 0) != 0) {
      p.positional.push_back(a);
      continue;
    }
    std::string name = a, value;
    bool inline_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos) name = a.substr(0, eq), value = a.substr(eq + 1), inline_value = true;
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
      if (inline_value) throw UsageError(fmt::format("amor-data {}: {} takes no value", cmd, name));
      p.values.insert_or_assign(name, std::string(1, '1'));
    } else if (std::find(with_value.begin(), with_value.end(), name) != with_value.end()) {
      if (!inline_value) {
        if (i + 1 >= args.size()) throw UsageError(fmt::format("amor-data {}: {} needs a value", cmd, name));
        value = args[++i];
      }
      p.values[name] = value;
    } else {
      throw UsageError(fmt::format("amor-data {}: unknown option '{}'", cmd, name));
    }
  }
  return p;
}

double parse_fraction(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v >= 1)
    throw UsageError(fmt::format("--valid-fraction: expected a number in [0, 1), got '{}'", s));
  return v;
}

uint64_t parse_count(const std::string& s, const std::string& what) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suffix(end);
  double scale = suffix.empty() ? 1 : suffix == "K" || suffix == "k" ? 1e3 : suffix == "M" ? 1e6 : suffix == "G" ? 1e9 : -1;
  if (s.empty() || end == s.c_str() || scale < 0 || !(v * scale >= 1) || v * scale > 1e15 ||
      std::floor(v * scale) != v * scale)
    throw UsageError(fmt::format("{}: expected a positive whole number (K/M/G suffixes allowed), got '{}'", what, s));
  return static_cast<uint64_t>(v * scale);
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.0f} kB", b / 1e3);
}

int cmd_convert(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool tty) {
  Parsed p = parse(args, {"--tokenizer", "--out", "--valid-fraction", "--shard-tokens", "--field", "--text-docs"},
                   {"--overwrite", "--quiet"}, "convert");
  if (!p.has("--tokenizer")) throw UsageError("amor-data convert: --tokenizer is required (byte, gpt2, llama3 or a tokenizer.json)");
  if (!p.has("--out")) throw UsageError("amor-data convert: --out DIR is required");
  if (p.positional.empty()) throw UsageError("amor-data convert: no INPUT (text files, folders or .jsonl files)");
  ConvertOptions o;
  o.inputs = p.positional;
  o.out_dir = p.values["--out"];
  if (p.has("--valid-fraction")) o.valid_fraction = parse_fraction(p.values["--valid-fraction"]);
  if (p.has("--shard-tokens")) o.shard_tokens = parse_count(p.values["--shard-tokens"], "--shard-tokens");
  if (p.has("--field")) o.jsonl_field = p.values["--field"];
  if (p.has("--text-docs")) {
    try {
      o.text_docs = parse_text_docs(p.values["--text-docs"]);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  o.overwrite = p.has("--overwrite");
  int quarter = 0;  // non-terminal: last quarter reported
  bool drew = false;
  if (!p.has("--quiet")) {
    o.progress = [&](const ConvertProgress& g) {
      double frac = g.bytes_total ? static_cast<double>(g.bytes_done) / static_cast<double>(g.bytes_total) : 1.0;
      std::string line = fmt::format("convert: {:3.0f}% {} of {}, {} documents, {} tokens, {}/s", 100 * frac,
                                     human_bytes(static_cast<double>(g.bytes_done)),
                                     human_bytes(static_cast<double>(g.bytes_total)), g.documents, g.tokens,
                                     human_bytes(g.seconds > 0 ? static_cast<double>(g.bytes_done) / g.seconds : 0));
      if (tty) {
        err << "\r" << line << "\x1b[K" << std::flush;
        drew = true;
      } else if (static_cast<int>(frac * 4) > quarter) {
        quarter = static_cast<int>(frac * 4);
        err << line << "\n";
      }
    };
  }
  TokenEncoder enc = make_encoder(p.values["--tokenizer"]);
  ConvertStats st;
  try {
    st = convert_corpus(o, enc);
  } catch (...) {
    if (drew) err << "\n";
    throw;
  }
  if (drew) err << "\n";
  out << "wrote " << o.out_dir << "\n" << format_convert_stats(st);
  return 0;
}

int cmd_stats(const std::vector<std::string>& args, std::ostream& out) {
  Parsed p = parse(args, {}, {}, "stats");
  if (p.positional.empty()) throw UsageError("amor-data stats: name a dataset folder or a .tok file");
  for (size_t i = 0; i < p.positional.size(); ++i)
    out << (i ? "\n" : "") << format_summary(summarize_shards(p.positional[i]));
  return 0;
}

int cmd_export_kjv(const std::vector<std::string>& args, std::ostream& out) {
  Parsed p = parse(args, {"--out"}, {}, "export-kjv");
  if (!p.has("--out")) throw UsageError("amor-data export-kjv: --out FILE.jsonl is required");
  if (!p.positional.empty()) throw UsageError(fmt::format("amor-data export-kjv: unexpected argument '{}'", p.positional[0]));
  auto docs = corpus::kjv_chapters();
  corpus::write_jsonl(docs, p.values["--out"]);
  out << "wrote " << p.values["--out"] << ": " << docs.size() << " chapters of the King James Bible\n";
  return 0;
}

}  // namespace

int amor_data_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool tty) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string& cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end()) {
    out << kUsage;
    return 0;
  }
  try {
    if (cmd == "convert") return cmd_convert(rest, out, err, tty);
    if (cmd == "stats") return cmd_stats(rest, out);
    if (cmd == "export-kjv") return cmd_export_kjv(rest, out);
    throw UsageError(fmt::format("amor-data: unknown command '{}' (convert, stats, export-kjv)", cmd));
  } catch (const UsageError& e) {
    err << e.what() << "\n(amor-data --help for usage)\n";
    return 2;
  } catch (const std::exception& e) {
    err << "amor-data " << cmd << ": error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace amor::shards
