// LongBench (THUDM/LongBench v1: pred.py, eval.py, config/dataset2prompt.json and
// dataset2maxlen.json), English datasets, read from its jsonl (input, context, answers, length,
// all_classes, dataset, _id), LongBench-E buckets included:
//   prompt  = the dataset's template with {context} and {input} filled in (str.format)
//   tokens  = encode(prompt); if longer than the budget B = max_length - max_gen, LongBench's
//             middle truncation: prompt = decode(tokens[:B/2]) + decode(tokens[-B/2:]) (then
//             re-encoded; cut token-wise in the rare case the seam re-encodes longer)
//   output  = greedy generation of at most max_gen tokens, decoded with special tokens skipped;
//             no chat template (base models). samsum as pred.py generates it: eos_token_id =
//             [eos, encode("\n")[-1]] and min_new_tokens = 1, i.e. the generation stops when the
//             generated token IS the newline id (a token-level stop: "\n\n" or ".\n" tokens do
//             not stop it), and the first token is the best id other than eos and that newline
//             (GenRequest::stop_ids, min_new_tokens)
//   trec, triviaqa, samsum: the output's first line after leading newlines (eval.py:
//             prediction.lstrip('\n').split('\n')[0]), so an output that starts with "\n\n"
//             scores its next line
//   score   = max over the example's answers of the dataset's metric (longbench_metrics.h)
//   score_0_4k / score_4_8k / score_8k_plus: mean score of the examples with `length` < 4000,
//             < 8000, >= 8000 (scorer_e; NaN where a bucket is empty)
// Scores are fractions (LongBench prints 100x, rounded to 2 decimals).
#include <algorithm>
#include <functional>

#include "kernels/core/error.h"
#include "runner/eval/jsonl_records.h"
#include "runner/eval/longbench_metrics.h"
#include "runner/eval/task_runners.h"

namespace amor::eval {
namespace {

enum class Metric { QaF1, Rouge, Classification, Retrieval, Count, CodeSim };

struct Dataset {
  const char* name;
  Metric metric;
  int64_t max_gen;
  const char* prompt;
};

// LongBench gives hotpotqa, 2wikimqa and musique the same multi-document QA prompt.
constexpr const char* kMultiDocQaPrompt =
    "Answer the question based on the given passages. Only give me the answer and do not output "
    "any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question "
    "based on the given passages. Only give me the answer and do not output any other words.\n\n"
    "Question: {input}\nAnswer:";

// dataset2prompt.json / dataset2maxlen.json / eval.py's dataset2metric, English datasets.
const Dataset kDatasets[] = {
    {"narrativeqa", Metric::QaF1, 128,
     "You are given a story, which can be either a novel or a movie script, and a question. Answer "
     "the question as concisely as you can, using a single phrase if possible. Do not provide any "
     "explanation.\n\nStory: {context}\n\nNow, answer the question based on the story as concisely "
     "as you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: "
     "{input}\n\nAnswer:"},
    {"qasper", Metric::QaF1, 128,
     "You are given a scientific article and a question. Answer the question as concisely as you "
     "can, using a single phrase or sentence if possible. If the question cannot be answered based "
     "on the information in the article, write \"unanswerable\". If the question is a yes/no "
     "question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\n"
     "Article: {context}\n\n Answer the question based on the above article as concisely as you "
     "can, using a single phrase or sentence if possible. If the question cannot be answered based "
     "on the information in the article, write \"unanswerable\". If the question is a yes/no "
     "question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\n"
     "Question: {input}\n\nAnswer:"},
    {"multifieldqa_en", Metric::QaF1, 64,
     "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following "
     "question based on the above text, only give me the answer and do not output any other "
     "words.\n\nQuestion: {input}\nAnswer:"},
    {"hotpotqa", Metric::QaF1, 32,
     kMultiDocQaPrompt},
    {"2wikimqa", Metric::QaF1, 32,
     kMultiDocQaPrompt},
    {"musique", Metric::QaF1, 32,
     kMultiDocQaPrompt},
    {"gov_report", Metric::Rouge, 512,
     "You are given a report by a government agency. Write a one-page summary of the report.\n\n"
     "Report:\n{context}\n\nNow, write a one-page summary of the report.\n\nSummary:"},
    {"qmsum", Metric::Rouge, 512,
     "You are given a meeting transcript and a query containing a question or instruction. Answer "
     "the query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based "
     "on the above meeting transcript in one or more sentences.\n\nQuery: {input}\nAnswer:"},
    {"multi_news", Metric::Rouge, 512,
     "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n"
     "{context}\n\nNow, write a one-page summary of all the news.\n\nSummary:"},
    {"trec", Metric::Classification, 64,
     "Please determine the type of the question below. Here are some examples of questions.\n\n"
     "{context}\n{input}"},
    {"triviaqa", Metric::QaF1, 32,
     "Answer the question based on the given passage. Only give me the answer and do not output "
     "any other words. The following are some examples.\n\n{context}\n\n{input}"},
    {"samsum", Metric::Rouge, 128,
     "Summarize the dialogue into a few short sentences. The following are some examples.\n\n"
     "{context}\n\n{input}"},
    {"passage_count", Metric::Count, 32,
     "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. "
     "Please carefully read these paragraphs and determine how many unique paragraphs there are "
     "after removing duplicates. In other words, how many non-repeating paragraphs are there in "
     "total?\n\n{context}\n\nPlease enter the final count of unique paragraphs after removing "
     "duplicates. The output format should only contain the number, such as 1, 2, 3, and so on.\n\n"
     "The final answer is: "},
    {"passage_retrieval_en", Metric::Retrieval, 32,
     "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which "
     "paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\n"
     "Please enter the number of the paragraph that the abstract is from. The answer format must "
     "be like \"Paragraph 1\", \"Paragraph 2\", etc.\n\nThe answer is: "},
    {"lcc", Metric::CodeSim, 64, "Please complete the code given below. \n{context}Next line of code:\n"},
    {"repobench-p", Metric::CodeSim, 64,
     "Please complete the code given below. \n{context}{input}Next line of code:\n"},
};

const Dataset& find_dataset(const std::string& name) {
  for (const auto& d : kDatasets)
    if (name == d.name) return d;
  std::string known;
  for (const auto& d : kDatasets) known += std::string(known.empty() ? "" : ", ") + d.name;
  throw Error(fmt::format("longbench: unknown dataset '{}' (known: {})", name, known));
}

// template.format(context=..., input=...): the templates hold no other braces.
std::string fill(std::string_view tmpl, const std::string& context, const std::string& input) {
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 9, "{context}") == 0) {
      out += context;
      i += 9;
    } else if (tmpl.compare(i, 7, "{input}") == 0) {
      out += input;
      i += 7;
    } else {
      out += tmpl[i++];
    }
  }
  return out;
}

double metric_score(Metric m, const std::string& pred, const std::string& truth,
                    const std::vector<std::string>& all_classes) {
  switch (m) {
    case Metric::QaF1: return qa_f1_score(pred, truth);
    case Metric::Rouge: return rouge_l_score(pred, truth);
    case Metric::Classification: return classification_score(pred, truth, all_classes);
    case Metric::Retrieval: return retrieval_score(pred, truth);
    case Metric::Count: return count_score(pred, truth);
    case Metric::CodeSim: return code_sim_score(pred, truth);
  }
  return 0;
}

std::vector<int32_t> middle_truncate(const Tokenizer& tok, std::vector<int32_t> ids, size_t budget) {
  if (ids.size() <= budget) return ids;
  const size_t half = budget / 2;
  const std::span<const int32_t> all(ids);
  const std::string text = tok.decode(all.first(half), true) + tok.decode(all.last(half), true);
  std::vector<int32_t> out = tok.encode(text);
  if (out.size() > budget) {  // the seam re-encoded longer: splice the tokens instead
    std::vector<int32_t> spliced(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(half));
    spliced.insert(spliced.end(), out.end() - static_cast<std::ptrdiff_t>(budget - half), out.end());
    out = std::move(spliced);
  }
  return out;
}

}  // namespace

std::vector<std::string> longbench_datasets() {
  std::vector<std::string> out;
  for (const auto& d : kDatasets) out.emplace_back(d.name);
  return out;
}

TaskResult run_longbench(const TaskSpec& spec, EvalModel& model) {
  const std::string prefix = "longbench_";
  AMOR_CHECK(spec.name.rfind(prefix, 0) == 0, "longbench: task name '{}' must start with '{}'",
             spec.name, prefix);
  const std::string name = spec.name.substr(prefix.size());
  const Dataset& ds = find_dataset(name);
  const int64_t budget = model.max_length() - ds.max_gen;
  AMOR_CHECK(budget >= 2, "{}: the model's window ({} tokens) leaves no room for a prompt beside "
             "{} generated tokens", spec.name, model.max_length(), ds.max_gen);
  const auto records = read_jsonl(spec.path, spec.limit, spec.name);
  const Tokenizer& tok = model.tokenizer();
  struct Example {
    std::vector<std::string> answers, all_classes;
    int64_t length = 0;
  };
  std::vector<Example> examples;
  std::vector<GenRequest> requests;
  // samsum: pred.py's extra eos id, the last id of encode("\n") (add_special_tokens=False).
  std::vector<int32_t> stop_ids;
  int64_t min_new_tokens = 0;
  if (name == "samsum") {
    const std::vector<int32_t> newline = tok.encode("\n");
    AMOR_CHECK(!newline.empty(), "{}: tokenizer '{}' encodes \"\\n\" to no token", spec.name, tok.name());
    stop_ids = {newline.back()};
    min_new_tokens = 1;
  }
  for (const auto& r : records) {
    const std::string& dataset = r.string("dataset");
    if (dataset != name && dataset != name + "_e")
      r.fail("dataset", fmt::format("is '{}', but the task is {} (expected '{}' or '{}_e')", dataset,
                                    spec.name, name, name));
    Example e;
    e.answers = r.strings("answers");
    if (e.answers.empty()) r.fail("answers", "is empty");
    // all_classes is null except for the classification datasets.
    if (!r.field("all_classes").is_null()) e.all_classes = r.strings("all_classes");
    if (ds.metric == Metric::Classification && e.all_classes.empty())
      r.fail("all_classes", "must list the classes for a classification dataset");
    e.length = r.integer("length");
    const std::string prompt = fill(ds.prompt, r.string("context"), r.string("input"));
    requests.push_back({middle_truncate(tok, tok.encode(prompt), static_cast<size_t>(budget)),
                        ds.max_gen, {}, stop_ids, min_new_tokens});
    examples.push_back(std::move(e));
  }
  model.begin_task(spec.name);
  const auto outputs = model.generate(requests);
  AMOR_CHECK(outputs.size() == examples.size(), "{}: the model answered {} of {} requests",
             spec.name, outputs.size(), examples.size());
  TaskResult out;
  std::vector<double> buckets[3];
  for (size_t i = 0; i < examples.size(); ++i) {
    std::string pred = outputs[i];
    if (name == "trec" || name == "triviaqa" || name == "samsum") pred = first_line(pred);
    double score = 0;
    for (const auto& truth : examples[i].answers)
      score = std::max(score, metric_score(ds.metric, pred, truth, examples[i].all_classes));
    out.per_example["score"].push_back(score);
    out.per_example["length"].push_back(static_cast<double>(examples[i].length));
    buckets[examples[i].length < 4000 ? 0 : examples[i].length < 8000 ? 1 : 2].push_back(score);
  }
  out.metrics["score"] = mean_or_nan(out.per_example["score"]);
  out.metrics["score_0_4k"] = mean_or_nan(buckets[0]);
  out.metrics["score_4_8k"] = mean_or_nan(buckets[1]);
  out.metrics["score_8k_plus"] = mean_or_nan(buckets[2]);
  return out;
}

}  // namespace amor::eval
