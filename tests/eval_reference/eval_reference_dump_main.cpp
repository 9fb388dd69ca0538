// eval-reference-dump: what our scorers and text functions give, for the Python transcriptions of
// the reference scorers to check (tests/eval_reference/README.md).
//
//   eval_reference_dump code-points   one line per code point 0..0x10FFFF:
//       "<hex> <flags> <lower> <upper> <title>", flags one 0/1 digit each for is_space,
//       is_decimal, is_alnum, is_word, is_ascii_punctuation, is_case_ignorable, is_cased; a mapping
//       is "=" when it is the code point itself, else its code points in hex joined by ','.
//       The first line is "unicode <version>".
//   eval_reference_dump cases FILE    FILE: a JSON array of {"name", "op", "args"}; one JSON line
//       {"name": ..., "result": ...} per case (an error becomes {"error": message}).
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "data/json/json.h"
#include "data/synthetic/text_task.h"
#include "data/text/unicode_text.h"
#include "data/tokenizer/byte_tokenizer.h"
#include "kernels/core/error.h"
#include "runner/eval/longbench_metrics.h"
#include "runner/eval/pair_encoding.h"
#include "runner/eval/task_runners.h"

namespace {

using amor::json::Value;

std::string mapping(char32_t c, const std::u32string& m) {
  if (m.size() == 1 && m[0] == c) return "=";
  std::string out;
  for (size_t i = 0; i < m.size(); ++i) out += fmt::format("{}{:x}", i ? "," : "", static_cast<uint32_t>(m[i]));
  return out;
}

void dump_code_points() {
  namespace t = amor::text;
  std::string out = fmt::format("unicode {}\n", t::unicode_version());
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    out += fmt::format("{:x} {:d}{:d}{:d}{:d}{:d}{:d}{:d} {} {} {}\n", static_cast<uint32_t>(c),
                       t::is_space(c), t::is_decimal(c), t::is_alnum(c), t::is_word(c),
                       t::is_ascii_punctuation(c), t::is_case_ignorable(c), t::is_cased(c),
                       mapping(c, t::lower_full(c)), mapping(c, t::upper_full(c)),
                       mapping(c, t::title_full(c)));
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

std::string number(double d) { return fmt::format("{}", d); }  // shortest round-trip form

std::string strings_json(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + amor::json::quote(v[i]);
  return out + "]";
}

std::vector<std::string> strings_of(const Value& v) {
  std::vector<std::string> out;
  for (const auto& x : v.as_array("a list of strings")) out.push_back(x.as_string("a list entry"));
  return out;
}

// The result of one case as JSON text.
std::string run_case(const std::string& op, const amor::json::Array& a) {
  namespace e = amor::eval;
  namespace t = amor::text;
  auto s = [&](size_t i) -> const std::string& { return a.at(i).as_string("argument"); };
  if (op == "normalize_answer") return amor::json::quote(e::normalize_answer(s(0)));
  if (op == "qa_f1") return number(e::qa_f1_score(s(0), s(1)));
  if (op == "rouge_l") return number(e::rouge_l_score(s(0), s(1)));
  if (op == "fuzz_ratio") return number(e::fuzz_ratio(s(0), s(1)));
  if (op == "code_sim") return number(e::code_sim_score(s(0), s(1)));
  if (op == "classification") return number(e::classification_score(s(0), s(1), strings_of(a.at(2))));
  if (op == "retrieval") return number(e::retrieval_score(s(0), s(1)));
  if (op == "count") return number(e::count_score(s(0), s(1)));
  if (op == "first_line") return amor::json::quote(e::first_line(s(0)));
  if (op == "string_match_all") return number(amor::synthetic::string_match_all(s(0), strings_of(a.at(1))));
  if (op == "string_match_part") return number(amor::synthetic::string_match_part(s(0), strings_of(a.at(1))));
  if (op == "lm_eval_pair") {
    // encode_pair over the byte tokenizer: the two token lists decode to the two texts.
    const amor::ByteTokenizer tok;
    const auto r = e::encode_pair(tok, s(0), s(1));
    auto text_of = [&](const std::vector<int32_t>& ids) {
      std::string out;
      for (int32_t id : ids) out += id == tok.bos_id() ? std::string("<|bos|>") : std::string(tok.token_bytes(id));
      return out;
    };
    return strings_json({text_of(r.context), text_of(r.continuation)});
  }
  if (op == "hellaswag_query") return amor::json::quote(e::hellaswag_query(s(0), s(1), s(2)));
  if (op == "hellaswag_preprocess") return amor::json::quote(e::hellaswag_preprocess(s(0)));
  if (op == "winogrande_continuation") return amor::json::quote(e::winogrande_continuation(s(0)));
  if (op == "lower") return amor::json::quote(t::lower(s(0)));
  if (op == "upper") return amor::json::quote(t::upper(s(0)));
  if (op == "capitalize") return amor::json::quote(t::capitalize(s(0)));
  if (op == "strip") return amor::json::quote(std::string(t::strip(s(0))));
  if (op == "rstrip") return amor::json::quote(std::string(t::rstrip(s(0))));
  if (op == "split") return strings_json(t::split(s(0)));
  if (op == "decimal_runs") return strings_json(t::decimal_runs(s(0)));
  throw amor::Error(fmt::format("unknown op '{}'", op));
}

void dump_cases(const std::string& path) {
  const Value cases = amor::json::parse_file(path);
  for (const auto& c : cases.as_array("the cases")) {
    const std::string& name = c.at("name").as_string("name");
    std::string result;
    try {
      result = "\"result\":" + run_case(c.at("op").as_string("op"), c.at("args").as_array("args"));
    } catch (const std::exception& ex) {
      result = "\"error\":" + amor::json::quote(ex.what());
    }
    std::cout << "{\"name\":" << amor::json::quote(name) << "," << result << "}\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "code-points" && argc == 2) {
      dump_code_points();
      return 0;
    }
    if (mode == "cases" && argc == 3) {
      dump_cases(argv[2]);
      return 0;
    }
  } catch (const std::exception& ex) {
    std::cerr << "eval_reference_dump: " << ex.what() << "\n";
    return 1;
  }
  std::cerr << "usage: eval_reference_dump code-points | cases FILE.json\n";
  return 2;
}
