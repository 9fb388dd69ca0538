// Multiple-choice tasks as lm-evaluation-harness defines them (lm_eval/tasks/<task>/*.yaml and
// utils.py; every choice is scored as a loglikelihood request with target_delimiter " "):
//   hellaswag  (HF Rowan/hellaswag jsonl: activity_label, ctx_a, ctx_b, endings, label)
//     query   = preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize())
//     choices = preprocess(ending) for each ending; gold = int(label)
//     preprocess: strip; " [title]" -> ". "; drop every "[...]" (regex \[.*?\]); "  " -> " "
//   piqa       (goal, sol1, sol2, label): query "Question: {goal}\nAnswer:", choices [sol1, sol2]
//   arc_easy / arc_challenge (question, choices {text, label}, answerKey):
//     query "Question: {question}\nAnswer:", choices choices.text,
//     gold = choices.label.index(answerKey)
//   winogrande (sentence, option1, option2, answer "1"/"2"): partial scoring, the choices are the
//     contexts sentence[:i] + option (i = the index of "_") and the shared continuation is
//     " " + sentence[i+1:].strip(); acc only.
// Scores: ll_j = log p(" " + choice_j | query); acc = [argmax_j ll_j == gold]; acc_norm =
// [argmax_j ll_j / len(choice_j) == gold] with len in characters (code points) of the choice
// without the delimiter; argmax takes the first of equal values (np.argmax).
// strip() and capitalize() are Python's over Unicode (data/text/unicode_text.h).
#include <algorithm>

#include "data/text/unicode_text.h"
#include "kernels/core/error.h"
#include "runner/eval/jsonl_records.h"
#include "runner/eval/pair_encoding.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {
namespace {

struct ChoiceDoc {
  std::vector<std::string> contexts;       // one per choice (winogrande) or the query repeated
  std::vector<std::string> continuations;  // with the delimiter
  std::vector<std::string> choice_texts;   // without it, for acc_norm's lengths
  int64_t gold = 0;
  std::string where;
};

// Python's str.replace(old, new): every non-overlapping occurrence, left to right.
std::string replace_all(std::string_view s, std::string_view old, std::string_view repl) {
  std::string out;
  size_t i = 0;
  for (size_t at = s.find(old); at != std::string_view::npos; at = s.find(old, i)) {
    out.append(s.substr(i, at - i)).append(repl);
    i = at + old.size();
  }
  return out.append(s.substr(i));
}

}  // namespace

std::string hellaswag_preprocess(std::string_view text) {
  std::string t = replace_all(text::strip(text), " [title]", ". ");
  std::string u;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '[') {  // \[.*?\]: the nearest ']' on the same line ('.' excludes '\n')
      const size_t close = t.find_first_of("]\n", i + 1);
      if (close != std::string::npos && t[close] == ']') {
        i = close;
        continue;
      }
    }
    u += t[i];
  }
  return replace_all(u, "  ", " ");
}

std::string hellaswag_query(std::string_view activity_label, std::string_view ctx_a,
                            std::string_view ctx_b) {
  const std::string ctx = std::string(ctx_a) + " " + text::capitalize(ctx_b);
  return hellaswag_preprocess(std::string(activity_label) + ": " + ctx);
}

std::string winogrande_continuation(std::string_view sentence) {
  const size_t blank = sentence.find('_');
  AMOR_CHECK(blank != std::string_view::npos, "winogrande: the sentence has no '_' blank");
  return " " + std::string(text::strip(sentence.substr(blank + 1)));
}

namespace {

size_t code_point_count(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

ChoiceDoc same_context(const JsonlRecord& r, const std::string& query,
                       std::vector<std::string> choices, int64_t gold) {
  ChoiceDoc d;
  d.where = r.where();
  for (const auto& c : choices) {
    d.contexts.push_back(query);
    d.continuations.push_back(" " + c);
  }
  d.choice_texts = std::move(choices);
  d.gold = gold;
  return d;
}

ChoiceDoc read_doc(const std::string& task, const JsonlRecord& r) {
  if (task == "hellaswag") {
    std::vector<std::string> choices;
    for (const auto& e : r.strings("endings")) choices.push_back(hellaswag_preprocess(e));
    return same_context(r, hellaswag_query(r.string("activity_label"), r.string("ctx_a"),
                                           r.string("ctx_b")),
                        std::move(choices), r.integer_or_digits("label"));
  }
  if (task == "piqa")
    return same_context(r, "Question: " + r.string("goal") + "\nAnswer:",
                        {r.string("sol1"), r.string("sol2")}, r.integer("label"));
  if (task == "arc_easy" || task == "arc_challenge") {
    const json::Value& choices = r.field("choices");
    if (!choices.is_object()) r.fail("choices", "must be an object {\"text\": [...], \"label\": [...]}");
    JsonlRecord inner{r.path, r.line, choices};
    const auto texts = inner.strings("text"), labels = inner.strings("label");
    if (texts.size() != labels.size())
      r.fail("choices", fmt::format("has {} texts but {} labels", texts.size(), labels.size()));
    const std::string& key = r.string("answerKey");
    const auto it = std::find(labels.begin(), labels.end(), key);
    if (it == labels.end()) r.fail("answerKey", fmt::format("'{}' is not one of the choice labels", key));
    return same_context(r, "Question: " + r.string("question") + "\nAnswer:", texts,
                        it - labels.begin());
  }
  AMOR_CHECK(task == "winogrande", "multiple choice: unknown task '{}'", task);
  const std::string& sentence = r.string("sentence");
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) r.fail("sentence", "has no '_' blank");
  const std::string& answer = r.string("answer");
  if (answer != "1" && answer != "2") r.fail("answer", fmt::format("must be \"1\" or \"2\", got \"{}\"", answer));
  ChoiceDoc d;
  d.where = r.where();
  const std::string target = winogrande_continuation(sentence);
  for (const std::string& option : {r.string("option1"), r.string("option2")}) {
    d.contexts.push_back(sentence.substr(0, blank) + option);
    d.continuations.push_back(target);
    d.choice_texts.push_back(option);
  }
  d.gold = answer == "1" ? 0 : 1;
  return d;
}

size_t argmax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());  // first max
}

}  // namespace

TaskResult run_multiple_choice(const TaskSpec& spec, EvalModel& model) {
  const auto records = read_jsonl(spec.path, spec.limit, spec.name);
  std::vector<ChoiceDoc> docs;
  std::vector<LoglikRequest> requests;
  for (const auto& r : records) {
    docs.push_back(read_doc(spec.name, r));
    const ChoiceDoc& d = docs.back();
    if (d.gold < 0 || d.gold >= static_cast<int64_t>(d.contexts.size()))
      throw Error(fmt::format("{}: the gold answer {} is not one of the {} choices", d.where,
                              d.gold, d.contexts.size()));
    for (size_t j = 0; j < d.contexts.size(); ++j)
      requests.push_back(make_loglik_request(model.tokenizer(), d.contexts[j], d.continuations[j],
                                             model.max_length(),
                                             fmt::format("{} (choice {})", d.where, j)));
  }
  model.begin_task(spec.name);
  const auto results = model.loglikelihood(requests);
  AMOR_CHECK(results.size() == requests.size(), "{}: the model answered {} of {} requests",
             spec.name, results.size(), requests.size());
  const bool with_norm = spec.name != "winogrande";
  TaskResult out;
  auto& acc = out.per_example["acc"];
  std::vector<double> acc_norm;
  size_t k = 0;
  for (const auto& d : docs) {
    std::vector<double> ll, ll_norm;
    for (size_t j = 0; j < d.contexts.size(); ++j, ++k) {
      ll.push_back(results[k].logprob);
      ll_norm.push_back(results[k].logprob / static_cast<double>(code_point_count(d.choice_texts[j])));
    }
    acc.push_back(static_cast<int64_t>(argmax(ll)) == d.gold ? 1.0 : 0.0);
    acc_norm.push_back(static_cast<int64_t>(argmax(ll_norm)) == d.gold ? 1.0 : 0.0);
  }
  out.metrics["acc"] = mean_or_nan(acc);
  if (with_norm) {
    out.metrics["acc_norm"] = mean_or_nan(acc_norm);
    out.per_example["acc_norm"] = std::move(acc_norm);
  }
  return out;
}

}  // namespace amor::eval
